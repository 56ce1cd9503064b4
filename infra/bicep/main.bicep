// main.bicep deploys the idempotent order worker to Azure: a Service Bus queue
// with duplicate detection, a serverless Cosmos DB for NoSQL container that is
// the single arbiter of "already processed", the worker as a Container App
// scaled by KEDA on queue length, and the producer as a manually triggered
// Container Apps job. The relay publishes the container's change feed to the
// order-events topic, whose loyalty and shipping subscriptions each feed a
// subscriber (the worker in inbox mode). Application Insights receives the
// programs' traces through the environment's OpenTelemetry agent, diagnostic
// settings send Service Bus and Cosmos DB logs to Log Analytics, and metric
// and log alerts watch dead letters, backlog, throttling and restarts. The
// programs' logs take one path: stderr to ContainerAppConsoleLogs (the
// OpenTelemetry log bridge is off in every container). The audit
// (orderctl audit) runs as a scheduled job, and log alerts watch its failed
// runs and its absence.
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

@allowed([
  'dev'
  'production'
])
@description('Deployment profile (DEPLOY_PROFILE). dev: a dev/test shape on public endpoints with Microsoft Entra auth only, Service Bus Standard, Cosmos DB serverless. production: what the Azure Well-Architected guidance and AVM default to: Service Bus Premium, zone-redundant; Cosmos DB with autoscale throughput, zone redundancy and continuous backup; private endpoints and private DNS zones for both, public network access off; the Container Apps environment in a virtual network; a monthly budget alert.')
param profile string = 'dev'

@minValue(1)
@description('Production profile: the monthly budget of the resource group, in the billing currency (BUDGET_AMOUNT). See infra/README.md for what one month of the production profile costs at least.')
param budgetAmount int = 1000

@description('When this azd environment was first provisioned (FIRST_PROVISION_TIME, UTC, yyyy-MM-ddTHH:mm:ssZ), written once by the preprovision hook (infra/hooks). The production budget starts on the first of that month, since the budgets API refuses to change a start date, and the audit-missing alert stays quiet for a silence period after it. Empty: this provisioning\'s time, which is the value the hook has just written on the first provisioning.')
param firstProvisionTime string = ''

@description('This provisioning\'s time; used only while firstProvisionTime is empty. Leave it unset.')
param deploymentTime string = utcNow('yyyy-MM-ddTHH:mm:ssZ')

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

@description('Name of the Service Bus topic that carries order events from the relay to the subscribers.')
param topicName string = 'order-events'

@description('Name of the loyalty subscription; also the loyalty subscriber\'s inbox consumer name.')
param loyaltySubscriptionName string = 'loyalty'

@description('Name of the shipping subscription; also the shipping subscriber\'s inbox consumer name.')
param shippingSubscriptionName string = 'shipping'

@description('E-mail address that receives the alerts (ALERT_EMAIL). Empty: the alerts fire but notify nobody.')
param alertEmail string = ''

@minValue(1)
@description('Active messages in the queue or topic above which the backlog alert fires.')
param backlogAlertThreshold int = 1000

@description('Name of the Cosmos DB database.')
param cosmosDatabaseName string = 'orders'

@description('Name of the Cosmos DB container that holds one document per order (partition key /orderId).')
param cosmosContainerName string = 'orders'

@description('Cosmos DB container of the relay\'s lease documents.')
param cosmosLeasesContainerName string = 'leases'

@description('Cosmos DB containers of the loyalty and shipping subscribers\' inbox markers and entries.')
param cosmosLoyaltyContainerName string = 'loyalty'
param cosmosShippingContainerName string = 'shipping'

@description('Whether azd has already deployed the worker (SERVICE_WORKER_RESOURCE_EXISTS). When true, provisioning keeps the image azd deployed instead of resetting it to the bootstrap image.')
param workerExists bool = false

@description('Whether azd has already deployed the relay (SERVICE_RELAY_RESOURCE_EXISTS).')
param relayExists bool = false

@description('Whether azd has already deployed the loyalty subscriber (SERVICE_LOYALTY_RESOURCE_EXISTS).')
param loyaltyExists bool = false

@description('Whether azd has already deployed the shipping subscriber (SERVICE_SHIPPING_RESOURCE_EXISTS).')
param shippingExists bool = false

@description('When the audit job (orderctl audit) runs: a five-field cron expression in UTC (AUDIT_SCHEDULE). Default: daily at 03:17.')
param auditSchedule string = '17 3 * * *'

@minValue(1)
@maxValue(47)
@description('Hours without a completed audit after which the audit-missing alert fires. The default, 26, suits the daily schedule: one missed run, with two hours for a long run and log ingestion. Change it with auditSchedule.')
param auditMaxSilenceHours int = 26

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

var production = profile == 'production'
// The environment's first provisioning: it fixes the budget's first month
// and the end of the audit-missing alert's grace period.
var firstProvision = empty(firstProvisionTime) ? deploymentTime : firstProvisionTime
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

module relayIdentity 'modules/identity.bicep' = {
  name: 'relay-identity'
  scope: rg
  params: {
    name: 'id-relay-${resourceToken}'
    location: location
    tags: tags
  }
}

module loyaltyIdentity 'modules/identity.bicep' = {
  name: 'loyalty-identity'
  scope: rg
  params: {
    name: 'id-loyalty-${resourceToken}'
    location: location
    tags: tags
  }
}

module shippingIdentity 'modules/identity.bicep' = {
  name: 'shipping-identity'
  scope: rg
  params: {
    name: 'id-shipping-${resourceToken}'
    location: location
    tags: tags
  }
}

module orderctlIdentity 'modules/identity.bicep' = {
  name: 'orderctl-identity'
  scope: rg
  params: {
    name: 'id-orderctl-${resourceToken}'
    location: location
    tags: tags
  }
}

// The scheduled audit (orderctl audit) runs as an identity of its own that
// may only read the Cosmos DB database: not orderctl's, which may also
// receive, resubmit and purge dead letters, rights an unattended daily run
// has no use for.
module auditIdentity 'modules/identity.bicep' = {
  name: 'audit-identity'
  scope: rg
  params: {
    name: 'id-audit-${resourceToken}'
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
    topicName: topicName
    loyaltySubscriptionName: loyaltySubscriptionName
    shippingSubscriptionName: shippingSubscriptionName
    publisherPrincipalId: relayIdentity.outputs.principalId
    loyaltyPrincipalId: loyaltyIdentity.outputs.principalId
    shippingPrincipalId: shippingIdentity.outputs.principalId
    operatorPrincipalId: orderctlIdentity.outputs.principalId
    logAnalyticsWorkspaceId: monitoring.outputs.id
    developerPrincipalId: principalId
    developerPrincipalType: principalType
    profile: profile
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
    leasesContainerName: cosmosLeasesContainerName
    loyaltyContainerName: cosmosLoyaltyContainerName
    shippingContainerName: cosmosShippingContainerName
    workerPrincipalId: workerIdentity.outputs.principalId
    relayPrincipalId: relayIdentity.outputs.principalId
    loyaltyPrincipalId: loyaltyIdentity.outputs.principalId
    shippingPrincipalId: shippingIdentity.outputs.principalId
    operatorPrincipalId: orderctlIdentity.outputs.principalId
    auditPrincipalId: auditIdentity.outputs.principalId
    logAnalyticsWorkspaceId: monitoring.outputs.id
    developerPrincipalId: principalId
    profile: profile
  }
}

// The production profile's network: private endpoints and DNS zones for
// Service Bus and Cosmos DB, and the subnet of the Container Apps
// environment.
module network 'modules/network.bicep' = if (production) {
  name: 'network'
  scope: rg
  params: {
    name: 'vnet-${resourceToken}'
    location: location
    tags: tags
    serviceBusNamespaceId: serviceBus.outputs.id
    cosmosAccountId: cosmos.outputs.id
  }
}

module budget 'modules/budget.bicep' = if (production) {
  name: 'budget'
  scope: rg
  params: {
    name: 'budget-${environmentName}'
    amount: budgetAmount
    startDate: '${substring(firstProvision, 0, 7)}-01'
    actionGroupId: alerts.outputs.actionGroupId
  }
}

module monitoring 'modules/monitoring.bicep' = {
  name: 'monitoring'
  scope: rg
  params: {
    name: 'log-${resourceToken}'
    appInsightsName: 'appi-${resourceToken}'
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
      relayIdentity.outputs.principalId
      loyaltyIdentity.outputs.principalId
      shippingIdentity.outputs.principalId
      orderctlIdentity.outputs.principalId
      auditIdentity.outputs.principalId
    ]
  }
}

module apps 'modules/containerapps.bicep' = {
  name: 'containerapps'
  scope: rg
  params: {
    environmentName: 'cae-${resourceToken}'
    infrastructureSubnetId: production ? network.outputs.infrastructureSubnetId : ''
    workerName: 'ca-worker-${resourceToken}'
    producerName: 'caj-producer-${resourceToken}'
    relayName: 'ca-relay-${resourceToken}'
    loyaltyName: 'ca-loyalty-${resourceToken}'
    shippingName: 'ca-shipping-${resourceToken}'
    orderctlName: 'caj-orderctl-${resourceToken}'
    auditName: 'caj-audit-${resourceToken}'
    location: location
    tags: tags
    logAnalyticsWorkspaceName: monitoring.outputs.name
    appInsightsName: monitoring.outputs.appInsightsName
    registryServer: registry.outputs.loginServer
    workerExists: workerExists
    relayExists: relayExists
    loyaltyExists: loyaltyExists
    shippingExists: shippingExists
    workerIdentityId: workerIdentity.outputs.id
    workerClientId: workerIdentity.outputs.clientId
    producerIdentityId: producerIdentity.outputs.id
    producerClientId: producerIdentity.outputs.clientId
    scalerIdentityId: scalerIdentity.outputs.id
    relayIdentityId: relayIdentity.outputs.id
    relayClientId: relayIdentity.outputs.clientId
    loyaltyIdentityId: loyaltyIdentity.outputs.id
    loyaltyClientId: loyaltyIdentity.outputs.clientId
    shippingIdentityId: shippingIdentity.outputs.id
    shippingClientId: shippingIdentity.outputs.clientId
    orderctlIdentityId: orderctlIdentity.outputs.id
    orderctlClientId: orderctlIdentity.outputs.clientId
    auditIdentityId: auditIdentity.outputs.id
    auditClientId: auditIdentity.outputs.clientId
    auditSchedule: auditSchedule
    serviceBusNamespaceName: serviceBus.outputs.name
    serviceBusHost: serviceBus.outputs.host
    queueName: serviceBus.outputs.queueName
    topicName: serviceBus.outputs.topicName
    loyaltySubscriptionName: serviceBus.outputs.loyaltySubscriptionName
    shippingSubscriptionName: serviceBus.outputs.shippingSubscriptionName
    cosmosEndpoint: cosmos.outputs.endpoint
    cosmosDatabaseName: cosmos.outputs.databaseName
    cosmosContainerName: cosmos.outputs.containerName
    cosmosLeasesContainerName: cosmos.outputs.leasesContainerName
    cosmosLoyaltyContainerName: cosmos.outputs.loyaltyContainerName
    cosmosShippingContainerName: cosmos.outputs.shippingContainerName
    lockDuration: lockDuration
    maxDeliveryCount: maxDeliveryCount
    duplicateDetectionWindow: duplicateDetectionWindow
    messageTimeToLive: messageTimeToLive
    minReplicas: workerMinReplicas
    maxReplicas: workerMaxReplicas
    scaleMessageCount: scaleMessageCount
  }
}

module alerts 'modules/alerts.bicep' = {
  name: 'alerts'
  scope: rg
  params: {
    alertEmail: alertEmail
    tags: tags
    serviceBusNamespaceId: serviceBus.outputs.id
    serviceBusEntities: [
      serviceBus.outputs.queueName
      serviceBus.outputs.topicName
    ]
    cosmosAccountId: cosmos.outputs.id
    logAnalyticsWorkspaceId: monitoring.outputs.id
    location: location
    backlogThreshold: backlogAlertThreshold
    auditJobName: apps.outputs.auditName
    auditImagePrefix: '${registry.outputs.loginServer}/'
    auditMaxSilenceHours: auditMaxSilenceHours
    firstProvisionTime: firstProvision
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
output SERVICEBUS_TOPIC string = serviceBus.outputs.topicName
output SERVICEBUS_LOYALTY_SUBSCRIPTION string = serviceBus.outputs.loyaltySubscriptionName
output SERVICEBUS_SHIPPING_SUBSCRIPTION string = serviceBus.outputs.shippingSubscriptionName
output COSMOS_ENDPOINT string = cosmos.outputs.endpoint
output COSMOS_DATABASE string = cosmos.outputs.databaseName
output COSMOS_CONTAINER string = cosmos.outputs.containerName
