// main.bicep deploys the idempotent order worker to Azure: a Service Bus queue
// with duplicate detection, a serverless Cosmos DB for NoSQL container that is
// the single arbiter of "already processed", the worker as a Container App
// scaled by KEDA on queue length, and the producer as a manually triggered
// Container Apps job.
//
// It runs at subscription scope so that `azd up` can create the resource group.
// Every identity authenticates with Microsoft Entra ID: local (key) auth is
// disabled on Service Bus and Cosmos DB, and no key or connection string is
// read, stored or output anywhere.
//
// Deploy with `azd up` (see infra/README.md).
targetScope = 'subscription'

@minLength(1)
@maxLength(64)
@description('Name of the azd environment; used in resource names and the azd-env-name tag.')
param environmentName string

@minLength(1)
@description('Azure region for every resource.')
param location string

@description('Object id of the principal running azd (AZURE_PRINCIPAL_ID: the signed-in user, or the service principal of a pipeline). That principal may send to and receive from the queue and read and write orders, so the binaries can run locally. Empty grants nothing.')
param principalId string = ''

@allowed([
  ''
  'User'
  'ServicePrincipal'
])
@description('Kind of principal that principalId names, as azd reports it (AZURE_PRINCIPAL_TYPE). Empty leaves principalType off the role assignments, and Azure looks the principal up itself.')
param principalType string = ''

@description('Name of the Service Bus queue that carries orders.')
param queueName string = 'orders'

@description('How long the broker remembers a MessageId and silently drops a resend of it (ISO 8601, PT20S to P7D). Duplicate detection can only be chosen when the queue is created.')
param duplicateDetectionWindow string = 'PT10M'

@description('How long a received message stays locked to one worker before it is redelivered (ISO 8601, at most PT5M). The worker renews the lock every half of this while it processes.')
param lockDuration string = 'PT1M'

@minValue(1)
@maxValue(2000)
@description('Deliveries after which the broker dead-letters a message by itself.')
param maxDeliveryCount int = 10

@description('Time to live of an unprocessed message before it expires to the dead-letter queue (ISO 8601).')
param messageTimeToLive string = 'P14D'

@description('Name of the Cosmos DB database.')
param cosmosDatabaseName string = 'orders'

@description('Name of the Cosmos DB container that holds one document per order (partition key /orderId).')
param cosmosContainerName string = 'orders'

@description('Whether azd has already deployed the worker (SERVICE_WORKER_RESOURCE_EXISTS). When true, provisioning keeps the image azd deployed instead of resetting it to the bootstrap image.')
param workerExists bool = false

@minValue(0)
@maxValue(30)
@description('Fewest worker replicas. 0 lets KEDA scale the worker to zero when the queue is empty.')
param workerMinReplicas int = 0

@minValue(1)
@maxValue(300)
@description('Most worker replicas KEDA may run.')
param workerMaxReplicas int = 10

@minValue(1)
@description('Active messages per replica at which KEDA adds a replica.')
param scaleMessageCount int = 100

var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = {
  'azd-env-name': environmentName
}

resource rg 'Microsoft.Resources/resourceGroups@2024-03-01' = {
  name: 'rg-${environmentName}'
  location: location
  tags: tags
}

module workerIdentity 'modules/identity.bicep' = {
  name: 'worker-identity'
  scope: rg
  params: {
    name: 'id-worker-${resourceToken}'
    location: location
    tags: tags
  }
}

module producerIdentity 'modules/identity.bicep' = {
  name: 'producer-identity'
  scope: rg
  params: {
    name: 'id-producer-${resourceToken}'
    location: location
    tags: tags
  }
}

module scalerIdentity 'modules/identity.bicep' = {
  name: 'scaler-identity'
  scope: rg
  params: {
    name: 'id-scaler-${resourceToken}'
    location: location
    tags: tags
  }
}

module serviceBus 'modules/servicebus.bicep' = {
  name: 'servicebus'
  scope: rg
  params: {
    name: 'sb-${resourceToken}'
    location: location
    tags: tags
    queueName: queueName
    duplicateDetectionWindow: duplicateDetectionWindow
    lockDuration: lockDuration
    maxDeliveryCount: maxDeliveryCount
    messageTimeToLive: messageTimeToLive
    receiverPrincipalId: workerIdentity.outputs.principalId
    senderPrincipalId: producerIdentity.outputs.principalId
    scalerPrincipalId: scalerIdentity.outputs.principalId
    developerPrincipalId: principalId
    developerPrincipalType: principalType
  }
}

module cosmos 'modules/cosmos.bicep' = {
  name: 'cosmos'
  scope: rg
  params: {
    name: 'cosmos-${resourceToken}'
    location: location
    tags: tags
    databaseName: cosmosDatabaseName
    containerName: cosmosContainerName
    workerPrincipalId: workerIdentity.outputs.principalId
    developerPrincipalId: principalId
  }
}

module monitoring 'modules/monitoring.bicep' = {
  name: 'monitoring'
  scope: rg
  params: {
    name: 'log-${resourceToken}'
    location: location
    tags: tags
  }
}

module registry 'modules/registry.bicep' = {
  name: 'registry'
  scope: rg
  params: {
    name: 'cr${resourceToken}'
    location: location
    tags: tags
    pullPrincipalIds: [
      workerIdentity.outputs.principalId
      producerIdentity.outputs.principalId
    ]
  }
}

module apps 'modules/containerapps.bicep' = {
  name: 'containerapps'
  scope: rg
  params: {
    environmentName: 'cae-${resourceToken}'
    workerName: 'ca-worker-${resourceToken}'
    producerName: 'caj-producer-${resourceToken}'
    location: location
    tags: tags
    logAnalyticsWorkspaceName: monitoring.outputs.name
    registryServer: registry.outputs.loginServer
    workerExists: workerExists
    workerIdentityId: workerIdentity.outputs.id
    workerClientId: workerIdentity.outputs.clientId
    producerIdentityId: producerIdentity.outputs.id
    producerClientId: producerIdentity.outputs.clientId
    scalerIdentityId: scalerIdentity.outputs.id
    serviceBusNamespaceName: serviceBus.outputs.name
    serviceBusHost: serviceBus.outputs.host
    queueName: serviceBus.outputs.queueName
    cosmosEndpoint: cosmos.outputs.endpoint
    cosmosDatabaseName: cosmos.outputs.databaseName
    cosmosContainerName: cosmos.outputs.containerName
    lockDuration: lockDuration
    maxDeliveryCount: maxDeliveryCount
    duplicateDetectionWindow: duplicateDetectionWindow
    messageTimeToLive: messageTimeToLive
    minReplicas: workerMinReplicas
    maxReplicas: workerMaxReplicas
    scaleMessageCount: scaleMessageCount
  }
}

// Outputs are the environment variables the worker and producer read; azd
// writes them to .azure/<env>/.env so the binaries can run locally against the
// deployed resources with the developer's own sign-in.
output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_CONTAINER_REGISTRY_ENDPOINT string = registry.outputs.loginServer
output SERVICEBUS_NAMESPACE string = serviceBus.outputs.host
output SERVICEBUS_QUEUE string = serviceBus.outputs.queueName
output SERVICEBUS_LOCK_DURATION string = lockDuration
output SERVICEBUS_MAX_DELIVERY_COUNT int = maxDeliveryCount
output SERVICEBUS_DUPLICATE_DETECTION_WINDOW string = duplicateDetectionWindow
output SERVICEBUS_MESSAGE_TTL string = messageTimeToLive
output COSMOS_ENDPOINT string = cosmos.outputs.endpoint
output COSMOS_DATABASE string = cosmos.outputs.databaseName
output COSMOS_CONTAINER string = cosmos.outputs.containerName
