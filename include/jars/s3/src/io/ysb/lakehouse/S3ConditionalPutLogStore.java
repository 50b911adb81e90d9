package io.ysb.lakehouse;

import io.delta.storage.HadoopFileSystemLogStore;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.util.Iterator;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

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
 */
public class S3ConditionalPutLogStore extends HadoopFileSystemLogStore {
  private static final String CONDITIONAL_CREATE = "fs.option.create.conditional.overwrite";

  public S3ConditionalPutLogStore(Configuration hadoopConf) {
    super(hadoopConf);
  }

  @Override
  public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
      throws IOException {
    FileSystem fs = path.getFileSystem(hadoopConf);
    try {
      // One PUT when the stream closes: the object appears whole or not at all.
      FSDataOutputStreamBuilder<FSDataOutputStream, ?> builder =
          fs.createFile(path).overwrite(overwrite);
      if (!overwrite) {
        builder.must(CONDITIONAL_CREATE, true);
      }
      FSDataOutputStream stream = builder.build();
      try (Writer writer = new OutputStreamWriter(stream, StandardCharsets.UTF_8)) {
        while (actions.hasNext()) {
          writer.write(actions.next());
          writer.write('\n');
        }
      }
    } catch (org.apache.hadoop.fs.FileAlreadyExistsException e) {
      throw alreadyCommitted(path, e);
    } catch (IOException e) {
      if (!overwrite && isPreconditionFailure(e)) {
        throw alreadyCommitted(path, e);
      }
      throw e;
    }
  }

  @Override
  public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
    return false;
  }

  private static FileAlreadyExistsException alreadyCommitted(Path path, Exception cause) {
    FileAlreadyExistsException error = new FileAlreadyExistsException(path.toString());
    error.initCause(cause);
    return error;
  }

  /** S3 answers a lost put-if-absent with 412 (or 409 when two arrive at once). */
  private static boolean isPreconditionFailure(Throwable error) {
    for (Throwable e = error; e != null; e = e.getCause()) {
      String name = e.getClass().getSimpleName();
      String message = String.valueOf(e.getMessage());
      if (name.equals("RemoteFileChangedException")
          || message.contains("412")
          || message.contains("PreconditionFailed")
          || message.contains("ConditionalRequestConflict")) {
        return true;
      }
    }
    return false;
  }
}
