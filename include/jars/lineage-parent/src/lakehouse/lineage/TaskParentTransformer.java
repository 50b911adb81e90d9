package lakehouse.lineage;

import io.openlineage.client.OpenLineage;
import io.openlineage.client.transports.EventTransformer;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;
import java.util.UUID;

/**
 * An OpenLineage transform-transport transformer: a run of a Spark query that an Airflow task's
 * Spark Connect session started gets that task instance as its parent (and the task's DAG run as
 * root), read from the session's tag by {@link JobTagsListener}. Every event of that run (START,
 * RUNNING, COMPLETE) gets the same parent. Other runs pass unchanged.
 *
 * <p>The tag's payload: base64url of "key=value" lines, the keys those of the OpenLineage Spark
 * parent settings without "spark.openlineage." (parentJobNamespace, parentJobName, parentRunId,
 * rootParentJobNamespace, rootParentJobName, rootParentRunId).
 */
public class TaskParentTransformer implements EventTransformer {
  private final Map<UUID, OpenLineage.ParentRunFacet> byRun = JobTagsListener.bounded(4096);
  private final Map<String, Map<String, String>> decoded = JobTagsListener.bounded(256);

  @Override
  public OpenLineage.RunEvent transform(OpenLineage.RunEvent event) {
    if (event.getRun() == null || event.getRun().getRunId() == null) {
      return event;
    }
    UUID runId = event.getRun().getRunId();
    OpenLineage ol = new OpenLineage(event.getProducer());
    String encoded = JobTagsListener.current();
    OpenLineage.ParentRunFacet parent = null;
    if (encoded != null) {
      Map<String, String> keys;
      synchronized (decoded) {
        keys = decoded.computeIfAbsent(encoded, TaskParentTransformer::decode);
      }
      parent = parentFacet(ol, keys);
    }
    synchronized (byRun) {
      if (parent != null) {
        byRun.put(runId, parent);
      } else {
        parent = byRun.get(runId);
      }
    }
    if (parent == null) {
      return event;
    }
    OpenLineage.RunFacets facets = event.getRun().getFacets();
    OpenLineage.RunFacetsBuilder builder = ol.newRunFacetsBuilder().parent(parent);
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
    return ol.newRunEventBuilder()
        .eventTime(event.getEventTime())
        .eventType(event.getEventType())
        .run(ol.newRun(runId, builder.build()))
        .job(event.getJob())
        .inputs(event.getInputs())
        .outputs(event.getOutputs())
        .build();
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
