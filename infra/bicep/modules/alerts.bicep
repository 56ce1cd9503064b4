// alerts.bicep creates the deployment's metric and log alerts and, when an e-mail
// address is given, the action group that mails them.
//
// Every metric alert watches a platform metric (Azure Monitor collects them without
// any agent or code), so each fires on real data:
//
//   - dead-lettered messages: DeadletteredMessages > 0 on the orders queue or
//     the order-events topic. The worker dead-letters an order whose id was
//     reused with other content (a mismatch) and a malformed one; the broker
//     dead-letters what exhausted its deliveries or expired. Any of them needs
//     an operator (orderctl), so one is enough.
//   - backlog: ActiveMessages above backlogThreshold on the queue or the
//     topic. Service Bus publishes no age-of-oldest-message metric, so the
//     backlog's size stands in for its age.
//   - Cosmos DB throttling: TotalRequests with StatusCode 429 above
//     throttleThreshold. The SDK retries 429s, so a few cost latency only; a
//     steady stream means the account is too small for the load.
//   - restarts: a log alert on the platform's restart events of each app
//     (RestartCount is cumulative, so a threshold on it never clears).
//   - the audit: a log alert on each failed execution of the scheduled audit
//     job (a violation of exactly-once, or an audit that could not run), and
//     one when no audit has produced output for auditMaxSilenceHours.
//
// With alertEmail empty no action group exists and the alerts have no
// actions: they still fire and show in the portal's alert list, but nobody is
// notified.

@description('E-mail address that receives the alerts. Empty: no action group; the alerts fire without notifying anyone.')
param alertEmail string = ''

@description('Tags for every resource.')
param tags object = {}

@description('Resource id of the Service Bus namespace.')
param serviceBusNamespaceId string

@description('Names of the queue and topic the Service Bus alerts watch.')
param serviceBusEntities array

@description('Resource id of the Cosmos DB account.')
param cosmosAccountId string

@description('Resource id of the Log Analytics workspace the log alerts query.')
param logAnalyticsWorkspaceId string

@description('Azure region of the log alerts (the workspace\'s).')
param location string

@minValue(1)
@description('Active messages in the queue or the topic above which the backlog alert fires.')
param backlogThreshold int = 1000

@minValue(0)
@description('Throttled (429) Cosmos DB requests in 15 minutes above which the throttling alert fires.')
param throttleThreshold int = 0

@description('Name of the scheduled audit job (orderctl audit) whose executions the audit alerts watch.')
param auditJobName string

@description('Prefix of the images azd deploys, the registry\'s login server and a slash: only output of the audit container running such an image counts as an audit (the bootstrap image audits nothing).')
param auditImagePrefix string

@minValue(1)
@maxValue(47)
@description('Hours without output of a deployed audit after which the audit-missing alert fires (the query looks back over two days at most).')
param auditMaxSilenceHours int = 26

@description('When the environment was first provisioned (UTC, yyyy-MM-ddTHH:mm:ssZ): the audit-missing alert stays quiet for auditMaxSilenceHours after it, until the first scheduled audit has had its chance to run.')
param firstProvisionTime string

var notify = !empty(alertEmail)

resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = if (notify) {
  name: 'ag-orders'
  location: 'global'
  tags: tags
  properties: {
    groupShortName: 'orders'
    enabled: true
    emailReceivers: [
      {
        name: 'operator'
        emailAddress: alertEmail
        useCommonAlertSchema: true
      }
    ]
  }
}

var alertActions = notify ? [
  {
    actionGroupId: actionGroup.id
  }
] : []

// The same action group, in the shape log alerts take.
var logAlertActions = {
  actionGroups: notify ? [
    actionGroup.id
  ] : []
}

resource deadLettered 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: 'orders-dead-lettered'
  location: 'global'
  tags: tags
  properties: {
    description: 'Messages are in a dead-letter queue: an order id reused with other content, a malformed order, or deliveries exhausted. Inspect them with orderctl.'
    severity: 2
    enabled: true
    scopes: [
      serviceBusNamespaceId
    ]
    // Overlapping windows: a line ingested up to ten minutes late is still
    // counted (Azure Monitor Logs' ingestion takes 20 s to 3 min on
    // average, with outliers).
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    autoMitigate: true
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'dead-lettered'
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: 'DeadletteredMessages'
          timeAggregation: 'Maximum'
          operator: 'GreaterThan'
          threshold: 0
          dimensions: [
            {
              name: 'EntityName'
              operator: 'Include'
              values: serviceBusEntities
            }
          ]
        }
      ]
    }
    actions: alertActions
  }
}

resource backlog 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: 'orders-backlog'
  location: 'global'
  tags: tags
  properties: {
    description: 'More active messages than the backlog threshold wait in the queue or the topic for 15 minutes: the consumers are down, scaled too low, or throttled.'
    severity: 3
    enabled: true
    scopes: [
      serviceBusNamespaceId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    autoMitigate: true
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'backlog'
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: 'ActiveMessages'
          timeAggregation: 'Minimum'
          operator: 'GreaterThan'
          threshold: backlogThreshold
          dimensions: [
            {
              name: 'EntityName'
              operator: 'Include'
              values: serviceBusEntities
            }
          ]
        }
      ]
    }
    actions: alertActions
  }
}

resource throttled 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: 'orders-cosmos-throttled'
  location: 'global'
  tags: tags
  properties: {
    description: 'Cosmos DB answered requests with 429 (request rate too large). The SDK retries them; many mean the account cannot keep up with the load.'
    severity: 3
    enabled: true
    scopes: [
      cosmosAccountId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    autoMitigate: true
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'throttled'
          metricNamespace: 'Microsoft.DocumentDB/databaseAccounts'
          metricName: 'TotalRequests'
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: throttleThreshold
          dimensions: [
            {
              name: 'StatusCode'
              operator: 'Include'
              values: [
                '429'
              ]
            }
          ]
        }
      ]
    }
    actions: alertActions
  }
}

// Restarts: Container Apps' RestartCount metric is cumulative over a
// replica's life (the Container Apps team in microsoft/azure-container-apps
// #467 and #1384), so a static threshold on it stays red for as long as a
// restarted replica lives: the relay's lives for days. Azure Monitor metric
// alerts offer static and dynamic thresholds only, no rate or delta of a
// metric. This log alert counts the platform's restart events instead, in
// the resource-specific table ContainerAppSystemLogs (the environment's
// diagnostic setting is Dedicated): each one is an increase, and the alert
// resolves itself (autoMitigate) once a window passes without one. It counts
// a container that ended with a non-zero exit code (a crash; an OOM kill is
// exit code 137) and a failed liveness probe, which restarts the container
// (readiness failures are normal while a replica drains, and are not
// counted); a clean exit (code 0, a scale-in or a new revision) is not a
// restart. Microsoft documents the Reason column but not its values: the
// ones named here are those public reports show Container Apps writing
// (ContainerTerminated with "Container '...' was terminated with exit code
// '137'": microsoft/azure-container-apps #1163, #1085; ProbeFailed, "Probe
// of StartUp failed ...": a live lab's system log stream; PodUnhealthy,
// "Readiness probe failed ...": #723, spelled PodUnhealhy in #399), and
// infra's tests refuse any
// other. Jobs' lines carry JobName, not ContainerAppName, and are left to
// the audit alerts. One alert per app: ContainerAppName is a dimension.
var restartQuery = 'ContainerAppSystemLogs | where isnotempty(ContainerAppName) | where (Reason == "ContainerTerminated" and Log contains "terminated with exit code" and Log !contains "exit code \'0\'") or (Reason in ("ProbeFailed", "PodUnhealthy", "PodUnhealhy") and Log has "liveness") | summarize restarts = count() by ContainerAppName'

resource restarts 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'orders-restarts'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders-restarts'
    // Created with the tables it reads: Azure's validation runs the query
    // and fails on a table that has no rows yet. The query's columns are
    // checked by infra's tests against the tables' documented schemas.
    skipQueryValidation: true
    description: 'A container of an app crashed, was OOM-killed, backed off or failed its liveness probe in the last 15 minutes. Its logs are in ContainerAppConsoleLogs, the platform events in ContainerAppSystemLogs.'
    severity: 2
    enabled: true
    scopes: [
      logAnalyticsWorkspaceId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: restartQuery
          timeAggregation: 'Total'
          metricMeasureColumn: 'restarts'
          operator: 'GreaterThan'
          threshold: 0
          dimensions: [
            {
              name: 'ContainerAppName'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: logAlertActions
  }
}

// Mismatches: the worker dead-letters an order whose id was reused with other
// content and logs it, at error, as one JSON line on stderr:
// {"level":"ERROR","msg":"dead-lettered","order_id":...,"reason":"OrderIdReused",...}.
// The environment writes it to ContainerAppConsoleLogs (column Log). This log
// alert counts those lines by reason and app over the last 15 minutes, every
// 5 (stateful: one notification while it stays fired); the dimension reason selects
// OrderIdReused, which is never the broker's doing and always needs a person:
// two different orders share an id. The DeadletteredMessages metric alert
// above cannot tell it from the other reasons.
var deadLetterQuery = 'ContainerAppConsoleLogs | extend entry = parse_json(Log) | where tostring(entry.msg) == "dead-lettered" | extend reason = tostring(entry.reason) | summarize dead_letters = count() by reason, ContainerAppName'

resource mismatches 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'orders-mismatch'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders-mismatch'
    // Created with the tables it reads: Azure's validation runs the query
    // and fails on a table that has no rows yet. The query's columns are
    // checked by infra's tests against the tables' documented schemas.
    skipQueryValidation: true
    description: 'An order id was reused with other content (dead-letter reason OrderIdReused): two different orders share an id. orderctl dlq show <order id> prints the field-by-field difference with the stored order.'
    severity: 1
    enabled: true
    scopes: [
      logAnalyticsWorkspaceId
    ]
    // Overlapping windows: a line ingested up to ten minutes late is still
    // counted (Azure Monitor Logs' ingestion takes 20 s to 3 min on
    // average, with outliers).
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: deadLetterQuery
          timeAggregation: 'Total'
          metricMeasureColumn: 'dead_letters'
          operator: 'GreaterThan'
          threshold: 0
          dimensions: [
            {
              name: 'reason'
              operator: 'Include'
              values: [
                'OrderIdReused'
              ]
            }
            {
              name: 'ContainerAppName'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: logAlertActions
  }
}

// The audit's result. Container Apps publishes a job metric, Executions, with
// the dimensions state, jobName and executionName (Microsoft, "Supported
// metrics for Microsoft.App/jobs",
// https://learn.microsoft.com/azure/azure-monitor/reference/supported-metrics/microsoft-app-jobs-metrics),
// but the values of state are not documented, and metric alerts on jobs are
// an open feature request (microsoft/azure-container-apps #1352; #1027: "being
// able to create alerts based on Jobs metrics" is being fixed). So both
// audit alerts are log alerts on the workspace, like the restart alert.
//
// Failed: when an execution ends, the environment writes a line to
// ContainerAppSystemLogs (columns JobName, Log, Reason: Microsoft's table
// reference,
// https://learn.microsoft.com/azure/azure-monitor/reference/tables/containerappsystemlogs)
// whose Log reads "... has exited with status Failed" or "... Succeeded";
// that text is not documented by Microsoft, it is what dotnet/dnceng's
// production alert rule pcs-container-job-execution-failures matches
// (src/Monitoring/Monitoring.DncEng/alertrules, over the _CL table's Log_s and
// JobName_s). orderctl audit exits 1 on a violation and 2 when it cannot
// audit; both fail the execution, as does the replica timeout. JobName is
// matched by prefix, so it holds whether the column carries the job's name or
// an execution's (<job>-<suffix>). The window is longer than the frequency so
// a late-ingested line is still seen, and muteActionsDuration keeps the later
// evaluations that see the same line from notifying again: one notification
// per failed run. autoMitigate is off (muteActionsDuration requires it): a
// violation is never resolved by time passing, only by a person.
var auditFailedQuery = 'ContainerAppSystemLogs | where JobName startswith "${auditJobName}" and Log has "has exited with status Failed" | summarize failed = count()'

resource auditFailed 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'orders-audit-failed'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders-audit-failed'
    // Created with the tables it reads: Azure's validation runs the query
    // and fails on a table that has no rows yet. The query's columns are
    // checked by infra's tests against the tables' documented schemas.
    skipQueryValidation: true
    description: 'The scheduled audit (orderctl audit) failed: it found a violation of exactly-once on the real store (exit 1) or could not audit (exit 2). Its summary names the invariant and the first ids: ContainerAppConsoleLogs | where ContainerName == "audit" | order by TimeGenerated desc. Re-run it with az containerapp job start.'
    severity: 1
    enabled: true
    scopes: [
      logAnalyticsWorkspaceId
    ]
    evaluationFrequency: 'PT15M'
    windowSize: 'PT1H'
    muteActionsDuration: 'PT1H'
    criteria: {
      allOf: [
        {
          query: auditFailedQuery
          timeAggregation: 'Total'
          metricMeasureColumn: 'failed'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: false
    actions: logAlertActions
  }
}

// Missing: an audit that stops running raises no failure. This alert counts
// the lines the audit container (ContainerName "audit", unique in the
// environment) wrote to ContainerAppConsoleLogs (columns ContainerName,
// ContainerImage: Microsoft's table reference,
// https://learn.microsoft.com/azure/azure-monitor/reference/tables/containerappconsolelogs)
// from an image of the deployment's registry in the last
// auditMaxSilenceHours, and fires when there are none: the schedule stopped,
// the job was deleted or disabled, its image cannot be pulled, or a bare
// `azd provision` left it on the bootstrap image. Every run writes its
// summary, so a run that errs counts as a run here (the failed alert covers
// it). summarize without `by` yields one row even when nothing matched, so
// the count is 0, not absent. The query looks back further than the window:
// overrideQueryTimeRange widens its time range to two days, inside which its
// own TimeGenerated filter applies. It resolves itself once an audit writes
// again. A new environment has no audit output until the first scheduled
// run (up to a day later): the last line drops the row, so nothing fires,
// until auditMaxSilenceHours have passed since the environment's first
// provisioning (firstProvisionTime, kept by the preprovision hook).
var auditMissingQuery = 'ContainerAppConsoleLogs | where TimeGenerated > ago(${auditMaxSilenceHours}h) | where ContainerName == "audit" and ContainerImage startswith "${auditImagePrefix}" | summarize lines = count() | where now() > datetime(${firstProvisionTime}) + ${auditMaxSilenceHours}h'

resource auditMissing 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'orders-audit-missing'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders-audit-missing'
    // Created with the tables it reads: Azure's validation runs the query
    // and fails on a table that has no rows yet. The query's columns are
    // checked by infra's tests against the tables' documented schemas.
    skipQueryValidation: true
    description: 'No scheduled audit (orderctl audit) has run the deployed image in the last ${auditMaxSilenceHours} hours: check the audit job\'s schedule, its executions (az containerapp job execution list) and its image (azd deploy audit).'
    severity: 2
    enabled: true
    scopes: [
      logAnalyticsWorkspaceId
    ]
    evaluationFrequency: 'PT1H'
    windowSize: 'PT1H'
    overrideQueryTimeRange: 'P2D'
    criteria: {
      allOf: [
        {
          query: auditMissingQuery
          timeAggregation: 'Total'
          metricMeasureColumn: 'lines'
          operator: 'LessThan'
          threshold: 1
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: logAlertActions
  }
}

@description('Resource id of the action group that mails alertEmail; empty when no address is set. The production budget notifies it too.')
output actionGroupId string = notify ? actionGroup.id : ''
