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
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
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
// resolves itself (autoMitigate) once a window passes without one. The
// Reason values are those Container Apps writes for a crashed, OOM-killed or
// backed-off container and a failed liveness probe (readiness failures are
// normal while a replica drains, and are not counted). One alert per app:
// ContainerAppName is a dimension.
var restartQuery = 'ContainerAppSystemLogs | where Reason in ("ContainerCrashing", "BackOff", "OOMKilled") or (Reason == "ProbeFailed" and Log has "liveness") | summarize restarts = count() by ContainerAppName'

resource restarts 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'orders-restarts'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders-restarts'
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
// alert counts those lines by reason and app; the dimension reason selects
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
    description: 'An order id was reused with other content (dead-letter reason OrderIdReused): two different orders share an id. orderctl dlq show <order id> prints the field-by-field difference with the stored order.'
    severity: 1
    enabled: true
    scopes: [
      logAnalyticsWorkspaceId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
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
