// alerts.bicep creates the deployment's metric alerts and, when an e-mail
// address is given, the action group that mails them.
//
// Every alert watches a platform metric (Azure Monitor collects them without
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
//   - restarts: RestartCount > 0 on each container app: a failed liveness
//     probe or a crash.
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

@description('The container apps whose restarts raise an alert: objects with name (a short label) and id.')
param containerApps array

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

resource restarts 'Microsoft.Insights/metricAlerts@2018-03-01' = [for app in containerApps: {
  name: 'orders-restarts-${app.name}'
  location: 'global'
  tags: tags
  properties: {
    description: 'A replica of ${app.name} restarted: it crashed or failed its liveness probe. Its logs are in ContainerAppConsoleLogs.'
    severity: 2
    enabled: true
    scopes: [
      app.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    autoMitigate: true
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'restarts'
          metricNamespace: 'Microsoft.App/containerApps'
          metricName: 'RestartCount'
          timeAggregation: 'Maximum'
          operator: 'GreaterThan'
          threshold: 0
        }
      ]
    }
    actions: alertActions
  }
}]
