package lakehouse.lineage;

import io.openlineage.client.OpenLineage;
import io.openlineage.client.transports.EventTransformer;
import io.openlineage.client.transports.TransformConfig;
import io.openlineage.client.transports.Transport;
import io.openlineage.client.transports.TransportConfig;
import io.openlineage.client.transports.TransportResolver;
import io.openlineage.spark.agent.ArgumentParser;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.SparkEnv;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The engine's OpenLineage transform-transport transformer (docs/lineage.md "On the engine"). One
 * Spark application serves every Airflow task, so the listener alone gives each query run the
 * engine's application as parent and the engine's name ({@code lakehouse_engine.<action>...}) as
 * job. For each run, decided at its first event and kept for all its events:
 *
 * <ul>
 *   <li><b>parent</b>: a run of a query that an Airflow task's Spark Connect session started gets
 *       that task instance as its parent (and the task's DAG run as root), read from the session's
 *       tag by {@link JobTagsListener}. Other runs keep the listener's parent.
 *   <li><b>job name</b>: {@code <parent job>.<table>}, the parent being the Airflow task ({@code
 *       <dag_id>.<task_id>}) or, for a query of no task, the engine's application; the table the
 *       run's first output names (a CREATE TABLE's, in the listener's name), else its first input,
 *       as {@code <layer>.<name>} (the catalog's name) or {@code landing.<source>}; without a
 *       table, the listener's action ({@code range}). No machine path, no counter. The
 *       application run keeps its name.
 *   <li><b>run cycle</b> (the spec: one START and one of COMPLETE/ABORT/FAIL per run): a run whose
 *       first event is not its START (the listener could not build it: "Query execution is null")
 *       gets one, a copy of that first event written just before it through a transport of the
 *       wrapped one's settings (left out whole when there is none); a second START becomes
 *       RUNNING, an event after the terminal one OTHER.
 *       The runs of Delta's own log replays (a snapshot's state, named after {@code _delta_log})
 *       are left out too: they are the engine's reading of a table's log, not a task's lineage.
 * </ul>
 *
 * <p>The tag's payload: base64url of "key=value" lines, the keys those of the OpenLineage Spark
 * parent settings without "spark.openlineage." (parentJobNamespace, parentJobName, parentRunId,
 * rootParentJobNamespace, rootParentJobName, rootParentRunId).
 */
public class TaskParentTransformer implements EventTransformer {
  private static final Logger LOG = LoggerFactory.getLogger(TaskParentTransformer.class);

  /** A table's folder, on a file system or under an object store's bucket. */
  private static final Pattern TABLE = Pattern.compile("(?:^|.*/)tables/([^/]+)/([^/]+)/?$");
  /** A landing source's folder or file (its hour folders are cut by the removePath pattern). */
  private static final Pattern LANDING = Pattern.compile("(?:^|.*/)landing/([^/]+)(?:/.*)?$");

  static final class RunState {
    OpenLineage.ParentRunFacet parent;
    String jobName;
    boolean started;
    boolean ended;
    boolean left;
  }

  private final Map<UUID, RunState> runs = JobTagsListener.bounded(8192);
  private final Map<String, Map<String, String>> decoded = JobTagsListener.bounded(256);

  @Override
  public OpenLineage.RunEvent transform(OpenLineage.RunEvent event) {
    if (event.getRun() == null || event.getRun().getRunId() == null || event.getJob() == null) {
      return event;
    }
    UUID runId = event.getRun().getRunId();
    OpenLineage ol = new OpenLineage(event.getProducer());
    OpenLineage.RunEvent.EventType type = event.getEventType();
    String encoded = JobTagsListener.current();
    OpenLineage.ParentRunFacet tagged = null;
    if (encoded != null) {
      Map<String, String> keys;
      synchronized (decoded) {
        keys = decoded.computeIfAbsent(encoded, TaskParentTransformer::decode);
      }
      tagged = parentFacet(ol, keys);
    }
    RunState state;
    OpenLineage.RunEvent start = null;
    synchronized (runs) {
      state = runs.get(runId);
      if (state == null) {
        state = new RunState();
        runs.put(runId, state);
        state.left = isLogReplay(event.getJob().getName());
      }
      if (state.left) {
        return null; // TransformTransport emits nothing for a null event
      }
      if (state.parent == null && tagged != null) {
        state.parent = tagged;
      }
      if (state.jobName == null) {
        state.jobName = jobName(event, state.parent);
      }
      if (!state.started && type != OpenLineage.RunEvent.EventType.START) {
        // The listener could not build this run's START ("Query execution is null"): one of
        // this event's, written first by a transport like the one this transformer feeds.
        start = rebuild(ol, event, OpenLineage.RunEvent.EventType.START, state);
        if (!emitOwn(start)) {
          state.left = true;
          LOG.warn(
              "OpenLineage: run {} of {} left out: its first event is {}, not START",
              runId,
              event.getJob().getName(),
              type);
          return null;
        }
        state.started = true;
      }
      if (type == OpenLineage.RunEvent.EventType.START) {
        type = state.started ? OpenLineage.RunEvent.EventType.RUNNING : type;
        state.started = true;
      } else if (isTerminal(type)) {
        type = state.ended ? OpenLineage.RunEvent.EventType.OTHER : type;
        state.ended = true;
      } else if (state.ended) {
        type = OpenLineage.RunEvent.EventType.OTHER;
      }
    }
    return rebuild(ol, event, type, state);
  }

  private Transport own;
  private boolean ownResolved;

  /**
   * Emits {@code event} through a transport of the same settings as the one this transformer
   * feeds (the listener's {@code transport.transport.*}), built once from the SparkConf; false
   * when there is none.
   */
  private synchronized boolean emitOwn(OpenLineage.RunEvent event) {
    if (!ownResolved) {
      ownResolved = true;
      try {
        TransportConfig outer = ArgumentParser.parse(SparkEnv.get().conf()).getTransportConfig();
        if (outer instanceof TransformConfig) {
          own = TransportResolver.resolveTransportByConfig(((TransformConfig) outer).getTransport());
        }
      } catch (RuntimeException | LinkageError cannot) {
        LOG.warn("OpenLineage: no transport for a run's missing START: {}", cannot.toString());
      }
    }
    if (own == null) {
      return false;
    }
    try {
      own.emit(event);
      return true;
    } catch (RuntimeException failed) {
      LOG.warn("OpenLineage: a run's missing START not emitted: {}", failed.toString());
      return false;
    }
  }

  /** {@code event} as {@code type}, with the run's parent and job name. */
  static OpenLineage.RunEvent rebuild(
      OpenLineage ol,
      OpenLineage.RunEvent event,
      OpenLineage.RunEvent.EventType type,
      RunState state) {
    UUID runId = event.getRun().getRunId();
    OpenLineage.Run run = event.getRun();
    if (state.parent != null) {
      OpenLineage.RunFacets facets = run.getFacets();
      OpenLineage.RunFacetsBuilder builder = ol.newRunFacetsBuilder().parent(state.parent);
      if (facets != null) {
        builder
            .externalQuery(facets.getExternalQuery())
            .gcp_dataproc(facets.getGcp_dataproc())
            .extractionError(facets.getExtractionError())
            .nominalTime(facets.getNominalTime())
            .tags(facets.getTags())
            .errorMessage(facets.getErrorMessage())
            .environmentVariables(facets.getEnvironmentVariables())
            .test(facets.getTest())
            .gcp_composer_run(facets.getGcp_composer_run())
            .executionParameters(facets.getExecutionParameters())
            .jobDependencies(facets.getJobDependencies())
            .processing_engine(facets.getProcessing_engine());
        facets.getAdditionalProperties().forEach(builder::put);
      }
      run = ol.newRun(runId, builder.build());
    }
    OpenLineage.Job job = event.getJob();
    return ol.newRunEventBuilder()
        .eventTime(event.getEventTime())
        .eventType(type)
        .run(run)
        .job(ol.newJob(job.getNamespace(), state.jobName, job.getFacets()))
        .inputs(event.getInputs())
        .outputs(event.getOutputs())
        .build();
  }

  static boolean isTerminal(OpenLineage.RunEvent.EventType type) {
    return type == OpenLineage.RunEvent.EventType.COMPLETE
        || type == OpenLineage.RunEvent.EventType.FAIL
        || type == OpenLineage.RunEvent.EventType.ABORT;
  }

  /** Delta's log replay: the listener names it after its scan of {@code <table>/_delta_log}. */
  static boolean isLogReplay(String jobName) {
    return jobName != null && jobName.contains("delta_log");
  }

  static boolean isApplication(OpenLineage.Job job) {
    return job.getFacets() != null
        && job.getFacets().getJobType() != null
        && "APPLICATION".equals(job.getFacets().getJobType().getJobType());
  }

  /** {@code <parent job>.<table>}, or {@code <parent job>.<action>} for a run of no table. */
  static String jobName(OpenLineage.RunEvent event, OpenLineage.ParentRunFacet parent) {
    OpenLineage.Job job = event.getJob();
    String name = job.getName();
    if (isApplication(job)) {
      return name;
    }
    int dot = name.indexOf('.');
    String application = dot < 0 ? name : name.substring(0, dot);
    String base = parent != null ? parent.getJob().getName() : application;
    String table = null;
    if (event.getOutputs() != null) {
      for (OpenLineage.OutputDataset dataset : event.getOutputs()) {
        table = table != null ? table : tableOf(dataset.getName());
      }
    }
    // A CREATE TABLE names its table in its SQL and the listener's name, its output only at its end.
    table = table != null ? table : tableOf(name);
    if (event.getInputs() != null) {
      for (OpenLineage.InputDataset dataset : event.getInputs()) {
        table = table != null ? table : tableOf(dataset.getName());
      }
    }
    return base + "." + (table != null ? table : actionOf(name));
  }

  /** A dataset's table ({@code <layer>.<name>}) or landing source ({@code landing.<source>}). */
  static String tableOf(String dataset) {
    if (dataset == null) {
      return null;
    }
    Matcher table = TABLE.matcher(dataset);
    if (table.matches()) {
      return table.group(1) + "." + table.group(2);
    }
    Matcher landing = LANDING.matcher(dataset);
    if (landing.matches()) {
      return "landing." + landing.group(1);
    }
    return null;
  }

  /** The listener's action (the plan's node, "range"), without any path it names. */
  static String actionOf(String listenerName) {
    String[] parts = listenerName.split("\\.");
    String action = parts.length > 1 ? parts[1] : "query";
    action = action.toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9_]", "_");
    for (String cut : new String[] {"_file_", "_s3_", "_s3a_", "_delta_"}) {
      int at = action.indexOf(cut);
      action = at > 0 ? action.substring(0, at) : action;
    }
    action = action.replaceAll("_[0-9]+$", "");
    return action.isEmpty() ? "query" : action;
  }

  static Map<String, String> decode(String encoded) {
    Map<String, String> keys = new HashMap<>();
    try {
      String text = new String(Base64.getUrlDecoder().decode(encoded), StandardCharsets.UTF_8);
      for (String line : text.split("\n")) {
        int at = line.indexOf('=');
        if (at > 0) {
          keys.put(line.substring(0, at), line.substring(at + 1));
        }
      }
    } catch (IllegalArgumentException ignored) {
      // not ours: no parent
    }
    return keys;
  }

  static boolean isUuid(String text) {
    try {
      return text != null && UUID.fromString(text) != null;
    } catch (IllegalArgumentException notOne) {
      return false;
    }
  }

  static OpenLineage.ParentRunFacet parentFacet(OpenLineage ol, Map<String, String> keys) {
    String namespace = keys.get("parentJobNamespace");
    String name = keys.get("parentJobName");
    String runId = keys.get("parentRunId");
    if (namespace == null || name == null || !isUuid(runId)) {
      return null;
    }
    OpenLineage.ParentRunFacetBuilder parent =
        ol.newParentRunFacetBuilder()
            .job(ol.newParentRunFacetJobBuilder().namespace(namespace).name(name).build())
            .run(ol.newParentRunFacetRunBuilder().runId(UUID.fromString(runId)).build());
    String rootNamespace = keys.get("rootParentJobNamespace");
    String rootName = keys.get("rootParentJobName");
    String rootRunId = keys.get("rootParentRunId");
    if (rootNamespace != null && rootName != null && isUuid(rootRunId)) {
      parent.root(
          ol.newParentRunFacetRootBuilder()
              .job(ol.newRootJobBuilder().namespace(rootNamespace).name(rootName).build())
              .run(ol.newRootRunBuilder().runId(UUID.fromString(rootRunId)).build())
              .build());
    }
    return parent.build();
  }
}
