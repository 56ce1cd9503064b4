// containerapps.bicep creates the Container Apps environment, the worker as a
// container app scaled by KEDA on the orders queue's length, and the producer
// as a manually triggered Container Apps job.
//
// Identities: the worker runs as the worker identity (selected with
// AZURE_CLIENT_ID) and the producer as the producer identity. The KEDA rule
// authenticates with a third, scaler identity that is attached to the worker
// app only because Container Apps requires a scale rule's identity to be
// attached to the app; its identitySettings lifecycle None keeps it out of
// the containers, so the worker process could not select it even if it
// tried.
//
// Logs: the programs write JSON logs to stderr. The environment sends each
// container's stdout and stderr to Azure Monitor, and a diagnostic setting
// routes them to the Log Analytics workspace (table ContainerAppConsoleLogs;
// the _CL tables belong to the log-analytics destination, which needs the
// workspace's shared key). Nothing here reads a key, and the workspace has
// local (shared key) auth disabled.

@description('Container Apps environment name.')
param environmentName string

@description('Worker container app name.')
param workerName string

@description('Producer job name.')
param producerName string

@description('Azure region.')
param location string

@description('Tags for every resource; azd-service-name is added per service.')
param tags object = {}

@description('Name of the Log Analytics workspace that receives the logs.')
param logAnalyticsWorkspaceName string

@description('Login server of the registry the images are pulled from.')
param registryServer string

@description('Whether azd already deployed the worker; if so its current image is kept.')
param workerExists bool = false

@description('Resource id of the worker identity.')
param workerIdentityId string

@description('Client id of the worker identity (the worker\'s AZURE_CLIENT_ID).')
param workerClientId string

@description('Resource id of the producer identity.')
param producerIdentityId string

@description('Client id of the producer identity (the producer\'s AZURE_CLIENT_ID).')
param producerClientId string

@description('Resource id of the identity the KEDA scale rule authenticates with.')
param scalerIdentityId string

@description('Service Bus namespace name, for the KEDA scaler.')
param serviceBusNamespaceName string

@description('Fully qualified Service Bus namespace host, for the programs.')
param serviceBusHost string

@description('Queue name.')
param queueName string

@description('Cosmos DB account endpoint.')
param cosmosEndpoint string

@description('Cosmos DB database name.')
param cosmosDatabaseName string

@description('Cosmos DB container name.')
param cosmosContainerName string

@description('Queue lock duration (ISO 8601), so the worker renews locks in time.')
param lockDuration string

@description('Queue max delivery count, so the worker can log the last attempt.')
param maxDeliveryCount int

@description('Queue duplicate detection window (ISO 8601).')
param duplicateDetectionWindow string

@description('Queue default message time to live (ISO 8601).')
param messageTimeToLive string

@minValue(0)
@description('Fewest worker replicas.')
param minReplicas int = 0

@minValue(1)
@description('Most worker replicas.')
param maxReplicas int = 10

@minValue(1)
@description('Active messages per replica at which KEDA adds a replica.')
param scaleMessageCount int = 100

@minValue(1)
@description('Orders the producer job sends per run.')
param producerCount int = 1000

// Public bootstrap images that run until the first `azd deploy` replaces them.
var bootstrapWorkerImage = 'mcr.microsoft.com/azuredocs/containerapps-helloworld:latest'
var bootstrapProducerImage = 'mcr.microsoft.com/k8se/quickstart-jobs:latest'

resource workspace 'Microsoft.OperationalInsights/workspaces@2023-09-01' existing = {
  name: logAnalyticsWorkspaceName
}

resource environment 'Microsoft.App/managedEnvironments@2025-01-01' = {
  name: environmentName
  location: location
  tags: tags
  properties: {
    appLogsConfiguration: {
      destination: 'azure-monitor'
    }
    workloadProfiles: [
      {
        name: 'Consumption'
        workloadProfileType: 'Consumption'
      }
    ]
  }
}

resource environmentLogs 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  scope: environment
  name: 'logs-to-log-analytics'
  properties: {
    workspaceId: workspace.id
    logs: [
      {
        categoryGroup: 'allLogs'
        enabled: true
      }
    ]
  }
}

resource existingWorker 'Microsoft.App/containerApps@2025-01-01' existing = if (workerExists) {
  name: workerName
}

var workerImage = workerExists ? existingWorker.properties.template.containers[0].image : bootstrapWorkerImage
// The producer job always gets the bootstrap image from provisioning, and
// `azd deploy` (the second half of every `azd up`) sets the real one. Keeping
// the deployed image would need azd's SERVICE_PRODUCER_RESOURCE_EXISTS flag,
// and azd's resource-exists flags have shipped broken in several releases: a
// flag that says "exists" before the job does fails the whole deployment. The job only runs when started, so
// the bootstrap image between `azd provision` and `azd deploy` costs nothing.
var producerImage = bootstrapProducerImage

resource worker 'Microsoft.App/containerApps@2025-01-01' = {
  name: workerName
  location: location
  tags: union(tags, {
    'azd-service-name': 'worker'
  })
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${workerIdentityId}': {}
      '${scalerIdentityId}': {}
    }
  }
  properties: {
    environmentId: environment.id
    workloadProfileName: 'Consumption'
    configuration: {
      activeRevisionsMode: 'Single'
      registries: [
        {
          server: registryServer
          identity: workerIdentityId
        }
      ]
      // The scaler identity is attached only so the KEDA rule can use it;
      // lifecycle None keeps it out of the containers, so the worker
      // process (or anything else running in its container) cannot get a
      // token for it. The worker identity keeps the default (All).
      identitySettings: [
        {
          identity: scalerIdentityId
          lifecycle: 'None'
        }
      ]
    }
    template: {
      containers: [
        {
          name: 'worker'
          image: workerImage
          resources: {
            cpu: json('0.5')
            memory: '1Gi'
          }
          env: [
            {
              name: 'AZURE_CLIENT_ID'
              value: workerClientId
            }
            {
              name: 'SERVICEBUS_NAMESPACE'
              value: serviceBusHost
            }
            {
              name: 'SERVICEBUS_QUEUE'
              value: queueName
            }
            {
              name: 'COSMOS_ENDPOINT'
              value: cosmosEndpoint
            }
            {
              name: 'COSMOS_DATABASE'
              value: cosmosDatabaseName
            }
            {
              name: 'COSMOS_CONTAINER'
              value: cosmosContainerName
            }
            {
              name: 'SERVICEBUS_LOCK_DURATION'
              value: lockDuration
            }
            {
              name: 'SERVICEBUS_MAX_DELIVERY_COUNT'
              value: string(maxDeliveryCount)
            }
            {
              name: 'SERVICEBUS_DUPLICATE_DETECTION_WINDOW'
              value: duplicateDetectionWindow
            }
            {
              name: 'SERVICEBUS_MESSAGE_TTL'
              value: messageTimeToLive
            }
            {
              name: 'LOG_FORMAT'
              value: 'json'
            }
          ]
        }
      ]
      scale: {
        minReplicas: minReplicas
        maxReplicas: maxReplicas
        rules: [
          {
            name: 'orders-queue-length'
            custom: {
              type: 'azure-servicebus'
              identity: scalerIdentityId
              metadata: {
                namespace: serviceBusNamespaceName
                queueName: queueName
                messageCount: string(scaleMessageCount)
              }
            }
          }
        ]
      }
    }
  }
}

resource producer 'Microsoft.App/jobs@2025-01-01' = {
  name: producerName
  location: location
  tags: union(tags, {
    'azd-service-name': 'producer'
  })
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${producerIdentityId}': {}
    }
  }
  properties: {
    environmentId: environment.id
    workloadProfileName: 'Consumption'
    configuration: {
      triggerType: 'Manual'
      replicaTimeout: 1800
      replicaRetryLimit: 0
      manualTriggerConfig: {
        parallelism: 1
        replicaCompletionCount: 1
      }
      registries: [
        {
          server: registryServer
          identity: producerIdentityId
        }
      ]
    }
    template: {
      containers: [
        {
          name: 'producer'
          image: producerImage
          args: [
            '-count'
            string(producerCount)
          ]
          resources: {
            cpu: json('0.25')
            memory: '0.5Gi'
          }
          env: [
            {
              name: 'AZURE_CLIENT_ID'
              value: producerClientId
            }
            {
              name: 'SERVICEBUS_NAMESPACE'
              value: serviceBusHost
            }
            {
              name: 'SERVICEBUS_QUEUE'
              value: queueName
            }
            {
              name: 'LOG_FORMAT'
              value: 'json'
            }
          ]
        }
      ]
    }
  }
}

@description('Worker container app name.')
output workerName string = worker.name

@description('Producer job name; start a run with `az containerapp job start`.')
output producerName string = producer.name
