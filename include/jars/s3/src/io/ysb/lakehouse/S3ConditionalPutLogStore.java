package io.ysb.lakehouse;

import io.delta.storage.HadoopFileSystemLogStore;
import java.io.ByteArrayOutputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.util.Arrays;
import java.util.Iterator;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import software.amazon.awssdk.awscore.exception.AwsServiceException;
import software.amazon.awssdk.core.exception.SdkServiceException;

/**
 * Delta's commit protocol on S3 through the store's own put-if-absent (S3 conditional writes,
 * If-None-Match: *), so that every driver and delta-rs (which commits the same way) can write one
 * table: a commit file N.json is created only if no writer created it first; the loser gets
 * FileAlreadyExistsException, which Delta turns into a conflict check and a retry at N+1.
 *
 * Delta's S3SingleDriverLogStore is safe for one driver only (it checks, then writes, under a lock
 * inside its JVM); S3DynamoDBLogStore needs DynamoDB and an AWS SDK v1 jar not served here. S3 has
 * had strongly consistent, conditional PUTs since 2024, and Hadoop 3.5's S3A sends the header when
 * a file is created with fs.option.create.conditional.overwrite.
 *
 * <p>A failed create is ambiguous: the PUT may have landed and its answer been lost (a timeout, a
 * dropped connection), and the SDK's retry of a PUT that landed is answered 412. Every failed
 * create is therefore reconciled by reading the commit file: our own bytes there mean the commit
 * is ours (success), other bytes mean another writer's (conflict), no file means it did not
 * happen (the original error). Taking every 412 for a conflict would commit the same actions again
 * at the next version.
 */
public class S3ConditionalPutLogStore extends HadoopFileSystemLogStore {
  private static final String CONDITIONAL_CREATE = "fs.option.create.conditional.overwrite";
  private static final Logger LOG = LoggerFactory.getLogger(S3ConditionalPutLogStore.class);

  public S3ConditionalPutLogStore(Configuration hadoopConf) {
    super(hadoopConf);
  }

  @Override
  public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
      throws IOException {
    FileSystem fs = path.getFileSystem(hadoopConf);
    byte[] content = commitBytes(actions);
    try {
      // One PUT when the stream closes: the object appears whole or not at all.
      FSDataOutputStreamBuilder<FSDataOutputStream, ?> builder =
          fs.createFile(path).overwrite(overwrite);
      if (!overwrite) {
        builder.must(CONDITIONAL_CREATE, true);
      }
      try (FSDataOutputStream stream = builder.build()) {
        stream.write(content);
      }
    } catch (IOException e) {
      if (overwrite) {
        throw e;
      }
      reconcile(fs, path, content, e);
    }
  }

  /**
   * After a failed create of {@code path}: return when the file holds {@code content} (this
   * writer's commit landed), throw FileAlreadyExistsException when it holds anything else, and
   * {@code failure} itself when there is no such file (nothing was committed).
   */
  static void reconcile(FileSystem fs, Path path, byte[] content, IOException failure)
      throws IOException {
    byte[] found;
    try {
      found = readAll(fs, path);
    } catch (FileNotFoundException absent) {
      throw failure;
    } catch (IOException unreadable) {
      failure.addSuppressed(unreadable);
      if (isPreconditionFailure(failure)) {
        throw alreadyCommitted(path, failure);
      }
      throw failure;
    }
    if (Arrays.equals(found, content)) {
      LOG.warn("{}: the create failed ({}), but the file is this commit: committed", path,
          failure.toString());
      return;
    }
    throw alreadyCommitted(path, failure);
  }

  @Override
  public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
    return false;
  }

  private static byte[] commitBytes(Iterator<String> actions) {
    StringBuilder text = new StringBuilder();
    while (actions.hasNext()) {
      text.append(actions.next()).append('\n');
    }
    return text.toString().getBytes(StandardCharsets.UTF_8);
  }

  private static byte[] readAll(FileSystem fs, Path path) throws IOException {
    try (InputStream in = fs.open(path)) {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      in.transferTo(out);
      return out.toByteArray();
    }
  }

  private static FileAlreadyExistsException alreadyCommitted(Path path, Exception cause) {
    FileAlreadyExistsException error = new FileAlreadyExistsException(path.toString());
    error.initCause(cause);
    return error;
  }

  /**
   * S3 refuses a put-if-absent of an existing key with 412 PreconditionFailed, or 409
   * ConditionalRequestConflict when two arrive at once: told by the service's status and error
   * code, never by the message (a commit file's name, 00000000000000000412.json, holds "412").
   */
  static boolean isPreconditionFailure(Throwable error) {
    for (Throwable e = error; e != null; e = e.getCause()) {
      if (e instanceof org.apache.hadoop.fs.FileAlreadyExistsException
          || e instanceof FileAlreadyExistsException) {
        return true;
      }
      if (e instanceof SdkServiceException) {
        int status = ((SdkServiceException) e).statusCode();
        String code = "";
        if (e instanceof AwsServiceException
            && ((AwsServiceException) e).awsErrorDetails() != null) {
          code = String.valueOf(((AwsServiceException) e).awsErrorDetails().errorCode());
        }
        if (status == 412 || code.equals("PreconditionFailed")) {
          return true;
        }
        if (status == 409 && (code.isEmpty() || code.equals("ConditionalRequestConflict"))) {
          return true;
        }
      }
    }
    return false;
  }
}
