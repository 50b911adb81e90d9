package lakehouse.lineage;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerApplicationEnd;
import org.apache.spark.scheduler.SparkListenerApplicationStart;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd;
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart;

/**
 * Tells {@link TaskParentTransformer} which Airflow task the Spark event being dispatched belongs
 * to. Registered in spark.extraListeners before OpenLineage's listener: listeners of one queue run
 * in order on one thread, and OpenLineage's emits (so transforms) synchronously in its callback.
 *
 * <p>The task comes from a job tag {@code PREFIX + encoded}: a Spark Connect session's tag, which
 * the server adds to each of the session's jobs as {@code SparkConnect_Execute_User_<user>_Session_
 * <session>_Tag_<tag>} (ExecuteHolder.tagToSparkJobTag), seen on a SQL execution's start (its
 * jobTags) and a job's start (its "spark.job.tags" property). A query without the tag gets the
 * task of its Connect session (the session id in the server's own job tag of every operation,
 * ExecuteJobTag): a foreachBatch function's queries come from a Python worker that attaches to the
 * streaming query's session without its client's tags.
 */
public class JobTagsListener extends SparkListener {
  public static final String PREFIX = "openlineage-parent-";
  private static final ThreadLocal<String> CURRENT = new ThreadLocal<>();

  private static final Pattern SESSION = Pattern.compile("_Session_([0-9a-fA-F-]{36})_");

  private final Map<Long, String> byExecution = bounded(4096);
  private final Map<String, String> bySession = bounded(1024);
  private final Map<Integer, String> byJob = bounded(4096);

  /** The encoded parent of the event being dispatched on this thread, or null. */
  public static String current() {
    return CURRENT.get();
  }

  static <K, V> Map<K, V> bounded(int size) {
    return new LinkedHashMap<K, V>(64, 0.75f, true) {
      @Override
      protected boolean removeEldestEntry(Map.Entry<K, V> eldest) {
        return size() > size;
      }
    };
  }

  static String parentIn(String tag) {
    int at = tag == null ? -1 : tag.indexOf(PREFIX);
    return at < 0 ? null : tag.substring(at + PREFIX.length());
  }

  /** The parent among a query's job tags, else its Connect session's; noted for the session. */
  private String parentOf(Iterable<String> tags) {
    String parent = null;
    String session = null;
    for (String tag : tags) {
      parent = parent != null ? parent : parentIn(tag);
      if (session == null && tag.startsWith("SparkConnect_")) {
        Matcher matcher = SESSION.matcher(tag);
        session = matcher.find() ? matcher.group(1) : null;
      }
    }
    if (session != null) {
      if (parent != null) {
        bySession.put(session, parent);
      } else {
        parent = bySession.get(session);
      }
    }
    return parent;
  }

  @Override
  public void onOtherEvent(SparkListenerEvent event) {
    String parent = null;
    if (event instanceof SparkListenerSQLExecutionStart) {
      SparkListenerSQLExecutionStart start = (SparkListenerSQLExecutionStart) event;
      java.util.List<String> tags = new java.util.ArrayList<>();
      start.jobTags().foreach(tags::add);
      parent = parentOf(tags);
      if (parent != null) {
        byExecution.put(start.executionId(), parent);
      }
    } else if (event instanceof SparkListenerSQLExecutionEnd) {
      parent = byExecution.get(((SparkListenerSQLExecutionEnd) event).executionId());
    }
    CURRENT.set(parent);
  }

  @Override
  public void onJobStart(SparkListenerJobStart jobStart) {
    String parent = null;
    Properties properties = jobStart.properties();
    if (properties != null) {
      String tags = properties.getProperty("spark.job.tags");
      if (tags != null) {
        parent = parentOf(java.util.Arrays.asList(tags.split(",")));
      }
      String execution = properties.getProperty("spark.sql.execution.id");
      if (parent == null && execution != null) {
        try {
          parent = byExecution.get(Long.parseLong(execution));
        } catch (NumberFormatException ignored) {
          // not an execution id: no parent
        }
      }
    }
    if (parent != null) {
      byJob.put(jobStart.jobId(), parent);
    }
    CURRENT.set(parent);
  }

  @Override
  public void onJobEnd(SparkListenerJobEnd jobEnd) {
    CURRENT.set(byJob.remove(jobEnd.jobId()));
  }

  @Override
  public void onApplicationStart(SparkListenerApplicationStart applicationStart) {
    CURRENT.remove();
  }

  @Override
  public void onApplicationEnd(SparkListenerApplicationEnd applicationEnd) {
    CURRENT.remove();
  }
}
