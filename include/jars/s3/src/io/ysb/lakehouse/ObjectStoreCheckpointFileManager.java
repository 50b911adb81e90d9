package io.ysb.lakehouse;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
import org.apache.spark.internal.io.cloud.AbortableStreamBasedCheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager;
import java.io.IOException;

/**
 * Streaming checkpoints (offsets, commits, state) on S3 without rename: S3 has no atomic rename,
 * so Spark's default manager (write a temporary file, then rename it) copies each file. On s3a
 * this writes the file in place through an abortable stream: the object appears whole when the
 * stream closes, and a cancelled write (a failed batch) aborts the upload, leaving nothing. Other
 * paths (a local lakehouse, tests) keep Spark's default, so one engine serves both.
 */
public class ObjectStoreCheckpointFileManager implements CheckpointFileManager {
  private final CheckpointFileManager delegate;

  public ObjectStoreCheckpointFileManager(Path path, Configuration hadoopConf) {
    String scheme = path.toUri().getScheme();
    this.delegate =
        "s3a".equals(scheme)
            ? new AbortableStreamBasedCheckpointFileManager(path, hadoopConf)
            : new FileContextBasedCheckpointFileManager(path, hadoopConf);
  }

  @Override
  public CheckpointFileManager.CancellableFSDataOutputStream createAtomic(
      Path path, boolean overwriteIfPossible) {
    return delegate.createAtomic(path, overwriteIfPossible);
  }

  @Override
  public FSDataInputStream open(Path path) {
    return delegate.open(path);
  }

  @Override
  public FileStatus[] list(Path path, PathFilter filter) {
    return delegate.list(path, filter);
  }

  @Override
  public void mkdirs(Path path) {
    delegate.mkdirs(path);
  }

  @Override
  public boolean exists(Path path) {
    return delegate.exists(path);
  }

  @Override
  public void delete(Path path) {
    delegate.delete(path);
  }

  @Override
  public boolean isLocal() {
    return delegate.isLocal();
  }

  @Override
  public Path createCheckpointDirectory() {
    return delegate.createCheckpointDirectory();
  }

  @Override
  public void close() {
    delegate.close();
  }
}
