// servicebus.bicep creates the Service Bus namespace, the orders queue, the
// order-events topic with one subscription per subscriber (loyalty,
// shipping), and grants each principal the one data role it uses, scoped to
// the queue, the topic or its own subscription. A diagnostic setting sends the
// namespace's logs and metrics to the Log Analytics workspace.
//
// The namespace is Standard in the dev profile (Basic has no duplicate
// detection) and Premium, zone-redundant and private in production. Local (SAS key)
// authentication is disabled, so only Microsoft Entra identities can connect.
//
// Duplicate detection is a first, cheap filter only: the broker drops a resend
// with a MessageId it saw within the window even if the content differs. The
// worker's create-if-absent in Cosmos DB remains the real idempotency guard.
// On the topic it applies at the topic, before fan-out: a resend the relay
// makes within the window reaches no subscription twice; one made later does,
// and each subscriber's inbox marker drops it.

@description('Namespace name.')
param name string

@description('Azure region.')
param location string

@description('Tags for every resource.')
param tags object = {}

@description('Queue name.')
param queueName string

@description('Duplicate detection history window (ISO 8601, PT20S to P7D).')
param duplicateDetectionWindow string

@description('Peek-lock duration (ISO 8601, at most PT5M).')
param lockDuration string

@minValue(1)
@description('Deliveries after which the broker dead-letters a message.')
param maxDeliveryCount int

@description('Default message time to live (ISO 8601).')
param messageTimeToLive string

@description('Principal that receives and settles messages, and schedules delayed retries on the queue: the worker.')
param receiverPrincipalId string

@description('Principal that sends messages: the producer.')
param senderPrincipalId string

@description('Principal that reads queue length for KEDA. Reading entity runtime properties needs Manage rights, hence Data Owner, on this queue only.')
param scalerPrincipalId string

@description('Topic that carries order events from the relay to the subscribers.')
param topicName string

@description('Subscription of the loyalty subscriber.')
param loyaltySubscriptionName string

@description('Subscription of the shipping subscriber.')
param shippingSubscriptionName string

@description('Principal that publishes order events to the topic: the relay.')
param publisherPrincipalId string

@description('Principal that receives from the loyalty subscription: the loyalty subscriber.')
param loyaltyPrincipalId string

@description('Principal that receives from the shipping subscription: the shipping subscriber.')
param shippingPrincipalId string

@description('Principal of the operator tool orderctl (its Container Apps job): it peeks and receives the dead-letter queues of the queue and of each subscription, and resubmits to the queue.')
param operatorPrincipalId string

@description('Resource id of the Log Analytics workspace that receives the namespace\'s logs and metrics.')
param logAnalyticsWorkspaceId string

@description('Optional developer principal that gets Data Sender and Data Receiver on the queue, Data Sender on the topic and Data Receiver on each subscription. Empty grants nothing.')
param developerPrincipalId string = ''

@description('Kind of principal that developerPrincipalId names (User or ServicePrincipal, from azd\'s AZURE_PRINCIPAL_TYPE). Empty leaves principalType off, so a wrong guess cannot fail the deployment with UnmatchedPrincipalType.')
param developerPrincipalType string = ''

@allowed([
  'dev'
  'production'
])
@description('Deployment profile: dev (the default) or production (see main.bicep).')
param profile string = 'dev'

var production = profile == 'production'

// Built-in role definition ids (Azure built-in roles; they never change).
var dataReceiverRoleId = '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0'
var dataSenderRoleId = '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39'
var dataOwnerRoleId = '090c5cfd-751d-490a-894a-3ce6f1109419'

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' = {
  name: name
  location: location
  tags: tags
  // Production: Premium (dedicated capacity, private endpoints, zone
  // redundancy), one messaging unit; duplicate detection and topics are in
  // both tiers. Public network access is off there: the apps reach the
  // namespace through its private endpoint (network.bicep).
  sku: production ? {
    name: 'Premium'
    tier: 'Premium'
    capacity: 1
  } : {
    name: 'Standard'
    tier: 'Standard'
  }
  properties: {
    disableLocalAuth: true
    minimumTlsVersion: '1.2'
    publicNetworkAccess: production ? 'Disabled' : 'Enabled'
    zoneRedundant: production
  }
}

resource queue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' = {
  parent: namespace
  name: queueName
  properties: {
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: duplicateDetectionWindow
    lockDuration: lockDuration
    maxDeliveryCount: maxDeliveryCount
    defaultMessageTimeToLive: messageTimeToLive
    deadLetteringOnMessageExpiration: true
    requiresSession: false
    enablePartitioning: false
  }
}

resource topic 'Microsoft.ServiceBus/namespaces/topics@2024-01-01' = {
  parent: namespace
  name: topicName
  properties: {
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: duplicateDetectionWindow
    defaultMessageTimeToLive: messageTimeToLive
    enablePartitioning: false
    supportOrdering: true
  }
}

// Each subscription redelivers, dead-letters and expires exactly as the
// orders queue does: the subscribers run the same worker, which is told
// these settings.
resource loyaltySubscription 'Microsoft.ServiceBus/namespaces/topics/subscriptions@2024-01-01' = {
  parent: topic
  name: loyaltySubscriptionName
  properties: {
    lockDuration: lockDuration
    maxDeliveryCount: maxDeliveryCount
    defaultMessageTimeToLive: messageTimeToLive
    deadLetteringOnMessageExpiration: true
    deadLetteringOnFilterEvaluationExceptions: true
    requiresSession: false
  }
}

resource shippingSubscription 'Microsoft.ServiceBus/namespaces/topics/subscriptions@2024-01-01' = {
  parent: topic
  name: shippingSubscriptionName
  properties: {
    lockDuration: lockDuration
    maxDeliveryCount: maxDeliveryCount
    defaultMessageTimeToLive: messageTimeToLive
    deadLetteringOnMessageExpiration: true
    deadLetteringOnFilterEvaluationExceptions: true
    requiresSession: false
  }
}

resource namespaceDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  scope: namespace
  name: 'to-log-analytics'
  properties: {
    workspaceId: logAnalyticsWorkspaceId
    logAnalyticsDestinationType: 'Dedicated'
    logs: [
      {
        categoryGroup: 'allLogs'
        enabled: true
      }
    ]
    metrics: [
      {
        category: 'AllMetrics'
        enabled: true
      }
    ]
  }
}

resource workerReceives 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  scope: queue
  name: guid(queue.id, receiverPrincipalId, dataReceiverRoleId)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataReceiverRoleId)
    principalId: receiverPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// The worker schedules a delayed copy of a message that can only succeed
// later (a status change before its order) on its own queue: Send rights.
resource workerSchedules 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  scope: queue
  name: guid(queue.id, receiverPrincipalId, dataSenderRoleId)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataSenderRoleId)
    principalId: receiverPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource producerSends 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  scope: queue
  name: guid(queue.id, senderPrincipalId, dataSenderRoleId)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataSenderRoleId)
    principalId: senderPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource scalerReadsQueueLength 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  scope: queue
  name: guid(queue.id, scalerPrincipalId, dataOwnerRoleId)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataOwnerRoleId)
    principalId: scalerPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// orderctl: list, show and purge receive (or peek) from the dead-letter
// queues, which are sub-queues of the queue and of each subscription, so
// Data Receiver on the queue and on each subscription covers them;
// resubmit sends to the queue (Data Sender). Nothing on the topic: a
// subscription's dead letters are never resubmitted (docs/operating.md).
resource operatorReceives 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  scope: queue
  name: guid(queue.id, operatorPrincipalId, dataReceiverRoleId)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataReceiverRoleId)
    principalId: operatorPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource operatorResubmits 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  scope: queue
  name: guid(queue.id, operatorPrincipalId, dataSenderRoleId)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataSenderRoleId)
    principalId: operatorPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource operatorReceivesLoyalty 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  scope: loyaltySubscription
  name: guid(loyaltySubscription.id, operatorPrincipalId, dataReceiverRoleId)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataReceiverRoleId)
    principalId: operatorPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource operatorReceivesShipping 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  scope: shippingSubscription
  name: guid(shippingSubscription.id, operatorPrincipalId, dataReceiverRoleId)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataReceiverRoleId)
    principalId: operatorPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource developerSends 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(developerPrincipalId)) {
  scope: queue
  name: guid(queue.id, developerPrincipalId, dataSenderRoleId)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataSenderRoleId)
    principalId: developerPrincipalId
    principalType: empty(developerPrincipalType) ? null : developerPrincipalType
  }
}

resource developerReceives 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(developerPrincipalId)) {
  scope: queue
  name: guid(queue.id, developerPrincipalId, dataReceiverRoleId)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataReceiverRoleId)
    principalId: developerPrincipalId
    principalType: empty(developerPrincipalType) ? null : developerPrincipalType
  }
}

resource relayPublishes 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  scope: topic
  name: guid(topic.id, publisherPrincipalId, dataSenderRoleId)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataSenderRoleId)
    principalId: publisherPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource loyaltyReceives 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  scope: loyaltySubscription
  name: guid(loyaltySubscription.id, loyaltyPrincipalId, dataReceiverRoleId)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataReceiverRoleId)
    principalId: loyaltyPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource shippingReceives 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  scope: shippingSubscription
  name: guid(shippingSubscription.id, shippingPrincipalId, dataReceiverRoleId)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataReceiverRoleId)
    principalId: shippingPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// KEDA reads each subscription's message count, which needs Manage rights:
// Data Owner, on that subscription only.
resource scalerReadsLoyaltyLength 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  scope: loyaltySubscription
  name: guid(loyaltySubscription.id, scalerPrincipalId, dataOwnerRoleId)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataOwnerRoleId)
    principalId: scalerPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource scalerReadsShippingLength 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  scope: shippingSubscription
  name: guid(shippingSubscription.id, scalerPrincipalId, dataOwnerRoleId)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataOwnerRoleId)
    principalId: scalerPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource developerPublishes 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(developerPrincipalId)) {
  scope: topic
  name: guid(topic.id, developerPrincipalId, dataSenderRoleId)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataSenderRoleId)
    principalId: developerPrincipalId
    principalType: empty(developerPrincipalType) ? null : developerPrincipalType
  }
}

resource developerReceivesLoyalty 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(developerPrincipalId)) {
  scope: loyaltySubscription
  name: guid(loyaltySubscription.id, developerPrincipalId, dataReceiverRoleId)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataReceiverRoleId)
    principalId: developerPrincipalId
    principalType: empty(developerPrincipalType) ? null : developerPrincipalType
  }
}

resource developerReceivesShipping 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(developerPrincipalId)) {
  scope: shippingSubscription
  name: guid(shippingSubscription.id, developerPrincipalId, dataReceiverRoleId)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataReceiverRoleId)
    principalId: developerPrincipalId
    principalType: empty(developerPrincipalType) ? null : developerPrincipalType
  }
}

@description('Namespace name, as the KEDA azure-servicebus scaler expects it.')
output name string = namespace.name

// serviceBusEndpoint looks like https://sb-x.servicebus.windows.net:443/ ; the
// SDK wants the bare fully qualified host.
@description('Fully qualified namespace host, e.g. sb-x.servicebus.windows.net.')
output host string = split(split(replace(namespace.properties.serviceBusEndpoint, 'https://', ''), '/')[0], ':')[0]

@description('Queue name.')
output queueName string = queue.name

@description('Topic name.')
output topicName string = topic.name

@description('Loyalty subscription name.')
output loyaltySubscriptionName string = loyaltySubscription.name

@description('Shipping subscription name.')
output shippingSubscriptionName string = shippingSubscription.name

@description('Namespace resource id, for the metric alerts.')
output id string = namespace.id
