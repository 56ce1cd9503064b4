// containerapps.bicep creates the Container Apps environment, the worker as a
// container app scaled by KEDA on the orders queue's length, the producer as a
// manually triggered Container Apps job, the relay that publishes the orders
// container's change feed to the order-events topic, and one subscriber app
// per topic subscription (loyalty, shipping), each the worker in inbox mode
// scaled by KEDA on its subscription's length; orderctl as a manually
// triggered job and orderctl audit as a scheduled one.
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
// local (shared key) auth disabled. That is the one log path: every
// container sets OTEL_LOGS_EXPORTER=none, so no line is also exported as an
// OpenTelemetry log record (and ingested twice, in AppTraces).
//
// Telemetry: the environment runs the managed OpenTelemetry agent, which
// sends traces to Application Insights. It injects
// OTEL_EXPORTER_OTLP_ENDPOINT (gRPC, e.g. http://otel.service.k8se-apps:4317/)
// and OTEL_EXPORTER_OTLP_PROTOCOL=grpc into every container; the programs
// export OTLP to it when that variable is set. The agent's Application
// Insights destination takes no metrics (a documented limitation), so no
// metrics destination is configured and the programs export none
// (OTEL_METRICS_EXPORTER=none): alerts use the platform metrics of Service
// Bus, Cosmos DB and Container Apps and the environment's logs instead (see
// alerts.bicep).
//
// Health: the worker and the subscribers serve /livez, /readyz and /startupz
// on WORKER_HEALTH_ADDR (:8080), the relay on RELAY_HEALTH_ADDR (:8080). The probes reach the replica's own address,
// so they need no ingress; none of the apps has ingress.

@description('Container Apps environment name.')
param environmentName string

@description('Worker container app name.')
param workerName string

@description('Subnet the environment runs in (production: VNet-integrated). Empty: the platform\'s own network (dev).')
param infrastructureSubnetId string = ''

@description('Producer job name.')
param producerName string

@description('Azure region.')
param location string

@description('Tags for every resource; azd-service-name is added per service.')
param tags object = {}

@description('Name of the Log Analytics workspace that receives the logs.')
param logAnalyticsWorkspaceName string

@description('Name of the Application Insights component that receives the traces.')
param appInsightsName string

@description('Relay container app name.')
param relayName string

@description('Name of the orderctl job, the operator tool for the dead-letter queues.')
param orderctlName string

@description('Resource id of the orderctl identity.')
param orderctlIdentityId string

@description('Client id of the orderctl identity (its AZURE_CLIENT_ID).')
param orderctlClientId string

@description('Name of the audit job, orderctl audit on a schedule.')
param auditName string

@description('Resource id of the audit identity (Cosmos DB Data Reader on the database, nothing else).')
param auditIdentityId string

@description('Client id of the audit identity (its AZURE_CLIENT_ID).')
param auditClientId string

@description('When the audit runs: a five-field cron expression, in UTC.')
param auditSchedule string = '17 3 * * *'

@description('Loyalty subscriber container app name.')
param loyaltyName string

@description('Shipping subscriber container app name.')
param shippingName string

@description('Whether azd already deployed the relay; if so its current image is kept.')
param relayExists bool = false

@description('Whether azd already deployed the loyalty subscriber; if so its current image is kept.')
param loyaltyExists bool = false

@description('Whether azd already deployed the shipping subscriber; if so its current image is kept.')
param shippingExists bool = false

@description('Resource id of the relay identity.')
param relayIdentityId string

@description('Client id of the relay identity (the relay\'s AZURE_CLIENT_ID).')
param relayClientId string

@description('Resource id of the loyalty subscriber identity.')
param loyaltyIdentityId string

@description('Client id of the loyalty subscriber identity.')
param loyaltyClientId string

@description('Resource id of the shipping subscriber identity.')
param shippingIdentityId string

@description('Client id of the shipping subscriber identity.')
param shippingClientId string

@description('Topic the relay publishes order events to.')
param topicName string

@description('Subscription the loyalty subscriber receives from; also its inbox consumer name.')
param loyaltySubscriptionName string

@description('Subscription the shipping subscriber receives from; also its inbox consumer name.')
param shippingSubscriptionName string

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

@description('Cosmos DB container of the relay\'s lease documents.')
param cosmosLeasesContainerName string

@description('Cosmos DB container of the loyalty subscriber\'s inbox markers and entries.')
param cosmosLoyaltyContainerName string

@description('Cosmos DB container of the shipping subscriber\'s inbox markers and entries.')
param cosmosShippingContainerName string

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

@minValue(1)
@maxValue(100)
@description('Most replicas KEDA may run per subscriber.')
param subscriberMaxReplicas int = 5

// The worker's shutdown: on SIGTERM it stops receiving, lets the receive in
// progress collect for its drain window (1s), lets in-flight messages finish
// within WORKER_SHUTDOWN_GRACE and abandons the rest, each settlement bounded
// by its own 20s timeout. The platform must wait for all of it before it
// kills the container, or the cut-off messages stay locked until their locks
// expire, each a counted delivery.
var workerShutdownGrace = 'PT30S'
var terminationGracePeriodSeconds = 60

// The managed OpenTelemetry agent injects OTEL_EXPORTER_OTLP_ENDPOINT into
// every container, and the programs would export their metrics there too.
// The agent has no metrics destination to give them: Application Insights
// takes none from it, and an Azure Monitor workspace ingests OTLP only from
// a collector that signs in with Microsoft Entra ID, which the agent's OTLP
// destination (static headers) cannot. So the programs export traces only
// (OTEL_METRICS_EXPORTER=none); see infra/README.md for how the metrics are
// observed instead.
var otlpMetricsExporter = 'none'

// One log path: the programs log JSON to stderr, which the environment
// writes to ContainerAppConsoleLogs, where the log alerts read it. With the
// OpenTelemetry log bridge on, every line would also be exported through the
// agent to Application Insights (AppTraces) and ingested twice. So the
// bridge is off in every container and the agent has no logs destination.
var otlpLogsExporter = 'none'

// The Go runtime's memory settings: collect a quarter as often as the
// default (GOGC=400: the heap may grow to five times the live heap before a
// collection, about 8 MB more for the worker; measured against 200 side by
// side in test/bench's README), and
// collect harder near the container's memory instead of being OOM-killed
// (GOMEMLIMIT about 90 % of it, leaving the rest to what the Go runtime does
// not manage: the binary's pages, memory outside the runtime). Each limit is kept in
// step with its container's memory by a rule test.
var goGC = '400'
var workerMemory = '1Gi'
var workerGoMemLimit = '921MiB' // 90 % of 1024 MiB
var smallMemory = '0.5Gi'
var smallGoMemLimit = '460MiB' // 90 % of 512 MiB

// The relay's replicas. Its ETag-guarded leases let several run at once,
// each owning some feed ranges. In production the environment is
// zone-redundant, which "only provides benefits when you have 2 or more
// replicas, with 3 or more being ideal" (Microsoft, Reliability in Azure
// Container Apps): one per zone. Dev runs one.
var relayReplicas = empty(infrastructureSubnetId) ? 1 : 3

// The worker's traces: a trace-id ratio sampler (OTEL_TRACES_SAMPLER,
// OTEL_TRACES_SAMPLER_ARG) keeps this share of ordinary deliveries' traces;
// the worker keeps every redelivery's trace and a span of every delivery
// dead-lettered, abandoned or not settled whatever the ratio (docs/cost.md
// has what each setting costs). Not parent-based: the producer samples
// every trace, and a parent-based worker would follow it; a producer given
// the same ratio decides alike for the same trace id, so traces stay whole.
var workerTracesSampler = 'traceidratio'
var workerTracesSamplerArg = '0.01'

// The port the worker's health endpoints listen on (WORKER_HEALTH_ADDR).
var healthPort = 8080

// Startup: asked every 5s until /startupz answers 200, for at most 10 x 5s.
// Liveness: a restart after 3 failures 30s apart. Readiness: not ready after
// 3 failures 10s apart. Every timeout exceeds the health checks' own 5s
// bound, so a slow check fails as itself, not as a probe timeout.
var workerProbes = [
  {
    type: 'Startup'
    httpGet: {
      path: '/startupz'
      port: healthPort
    }
    initialDelaySeconds: 1
    periodSeconds: 5
    timeoutSeconds: 10
    failureThreshold: 10
  }
  {
    type: 'Liveness'
    httpGet: {
      path: '/livez'
      port: healthPort
    }
    periodSeconds: 30
    timeoutSeconds: 10
    failureThreshold: 3
  }
  {
    type: 'Readiness'
    httpGet: {
      path: '/readyz'
      port: healthPort
    }
    periodSeconds: 10
    timeoutSeconds: 10
    failureThreshold: 3
  }
]

// Public bootstrap images that run until the first `azd deploy` replaces them.
// The container apps' bootstrap image serves HTTP on port 80 and has none of
// the health paths, so a revision that runs it gets no probes (they would
// fail and restart it): an app is probed from the first provisioning that
// finds it deployed (<app>Exists), with the image azd deployed. After the
// very first `azd up`, run `azd provision` once to add the probes.
var bootstrapWorkerImage = 'mcr.microsoft.com/azuredocs/containerapps-helloworld:latest'
var bootstrapProducerImage = 'mcr.microsoft.com/k8se/quickstart-jobs:latest'

resource workspace 'Microsoft.OperationalInsights/workspaces@2023-09-01' existing = {
  name: logAnalyticsWorkspaceName
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: appInsightsName
}

// The managed OpenTelemetry agent exists only in preview API versions.
resource environment 'Microsoft.App/managedEnvironments@2025-10-02-preview' = {
  name: environmentName
  location: location
  tags: tags
  properties: {
    appLogsConfiguration: {
      destination: 'azure-monitor'
    }
    // Production: the environment runs in the virtual network's delegated
    // subnet, so its apps reach the private endpoints of Service Bus and
    // Cosmos DB; internal, since none of the apps has ingress. Zone
    // redundancy needs the subnet too.
    vnetConfiguration: empty(infrastructureSubnetId) ? null : {
      infrastructureSubnetId: infrastructureSubnetId
      internal: true
    }
    zoneRedundant: !empty(infrastructureSubnetId)
    appInsightsConfiguration: {
      connectionString: appInsights.properties.ConnectionString
    }
    openTelemetryConfiguration: {
      tracesConfiguration: {
        destinations: [
          'appInsights'
        ]
      }
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
    // Resource-specific tables (ContainerAppConsoleLogs,
    // ContainerAppSystemLogs); without it the logs land in AzureDiagnostics.
    logAnalyticsDestinationType: 'Dedicated'
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

resource existingRelay 'Microsoft.App/containerApps@2025-01-01' existing = if (relayExists) {
  name: relayName
}

resource existingLoyalty 'Microsoft.App/containerApps@2025-01-01' existing = if (loyaltyExists) {
  name: loyaltyName
}

resource existingShipping 'Microsoft.App/containerApps@2025-01-01' existing = if (shippingExists) {
  name: shippingName
}

var relayImage = relayExists ? existingRelay.properties.template.containers[0].image : bootstrapWorkerImage
var loyaltyImage = loyaltyExists ? existingLoyalty.properties.template.containers[0].image : bootstrapWorkerImage
var shippingImage = shippingExists ? existingShipping.properties.template.containers[0].image : bootstrapWorkerImage
// The producer job always gets the bootstrap image from provisioning, and
// `azd deploy` (the second half of every `azd up`) sets the real one. Keeping
// the deployed image would need azd's SERVICE_PRODUCER_RESOURCE_EXISTS flag,
// and azd's resource-exists flags have shipped broken in several releases: a
// flag that says "exists" before the job does fails the whole deployment. The job only runs when started, so
// the bootstrap image between `azd provision` and `azd deploy` costs nothing.
var producerImage = bootstrapProducerImage
// The orderctl job, likewise: every `azd deploy` sets its real image.
var orderctlImage = bootstrapProducerImage
// The audit job, likewise. A scheduled run between a bare `azd provision`
// and the next `azd deploy` runs the bootstrap image, which audits nothing;
// the audit-missing alert (alerts.bicep) counts only output of an image from
// the deployment's registry, so such a run does not hide a missing audit.
var auditImage = bootstrapProducerImage

// The audit pages through every container at low priority; two hours bound
// a run (the audit-missing alert allows for them).
var auditReplicaTimeout = 7200

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
            memory: workerMemory
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
            {
              name: 'OTEL_LOGS_EXPORTER'
              value: otlpLogsExporter
            }
            {
              name: 'GOGC'
              value: goGC
            }
            {
              name: 'GOMEMLIMIT'
              value: workerGoMemLimit
            }
            {
              name: 'OTEL_SERVICE_NAME'
              value: 'orderworker'
            }
            {
              name: 'OTEL_METRICS_EXPORTER'
              value: otlpMetricsExporter
            }
            {
              name: 'OTEL_TRACES_SAMPLER'
              value: workerTracesSampler
            }
            {
              name: 'OTEL_TRACES_SAMPLER_ARG'
              value: workerTracesSamplerArg
            }
            {
              name: 'WORKER_HEALTH_ADDR'
              value: ':${healthPort}'
            }
            {
              name: 'WORKER_SHUTDOWN_GRACE'
              value: workerShutdownGrace
            }
          ]
          probes: workerExists ? workerProbes : []
        }
      ]
      terminationGracePeriodSeconds: terminationGracePeriodSeconds
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
            memory: smallMemory
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
            {
              name: 'OTEL_METRICS_EXPORTER'
              value: otlpMetricsExporter
            }
            {
              name: 'OTEL_LOGS_EXPORTER'
              value: otlpLogsExporter
            }
            {
              name: 'GOGC'
              value: goGC
            }
            {
              name: 'GOMEMLIMIT'
              value: smallGoMemLimit
            }
          ]
        }
      ]
    }
  }
}

// orderctl, the operator tool for the dead-letter queues, as a manually
// triggered job with its own identity (Data Receiver on the queue and each
// subscription, which covers their dead-letter queues; Data Sender on the
// queue for resubmit; Cosmos DB Data Reader for `dlq show`). A job, not
// `az containerapp exec` into a worker replica: the worker scales to zero
// and its identity may not send. The job runs its container's args: set
// them with `az containerapp job update --args ...`, then start it with
// `az containerapp job start` (docs/operating.md). The template's args,
// `dlq list`, only peek, and every provisioning restores them.
resource orderctl 'Microsoft.App/jobs@2025-01-01' = {
  name: orderctlName
  location: location
  tags: union(tags, {
    'azd-service-name': 'orderctl'
  })
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${orderctlIdentityId}': {}
    }
  }
  properties: {
    environmentId: environment.id
    workloadProfileName: 'Consumption'
    configuration: {
      triggerType: 'Manual'
      replicaTimeout: 900
      replicaRetryLimit: 0
      manualTriggerConfig: {
        parallelism: 1
        replicaCompletionCount: 1
      }
      registries: [
        {
          server: registryServer
          identity: orderctlIdentityId
        }
      ]
    }
    template: {
      containers: [
        {
          name: 'orderctl'
          image: orderctlImage
          args: [
            'dlq'
            'list'
          ]
          resources: {
            cpu: json('0.25')
            memory: smallMemory
          }
          env: [
            {
              name: 'AZURE_CLIENT_ID'
              value: orderctlClientId
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
              name: 'SERVICEBUS_LOCK_DURATION'
              value: lockDuration
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
              name: 'LOG_FORMAT'
              value: 'json'
            }
            {
              name: 'OTEL_METRICS_EXPORTER'
              value: otlpMetricsExporter
            }
            {
              name: 'OTEL_LOGS_EXPORTER'
              value: otlpLogsExporter
            }
            {
              name: 'GOGC'
              value: goGC
            }
            {
              name: 'GOMEMLIMIT'
              value: smallGoMemLimit
            }
          ]
        }
      ]
    }
  }
}

// The audit: `orderctl audit` on a schedule (auditSchedule, UTC), checking on
// the real store the invariants the simulation checks on its model. It
// exits 0 when the store is clean, 1 on a violation and 2 when it could not
// audit; either non-zero exit fails the execution, which the audit-failed
// alert watches (alerts.bicep). No retries: a violation found once is found
// again, and a retry would only repeat the alert. Its own identity may only
// read the database (cosmos.bicep): the job holds no Service Bus role, so it
// gets no SERVICEBUS_* settings except the queue's timings, from which it
// derives how long a claim may stay in progress (the redelivery horizon).
// AUDIT_CONSUMERS names each subscriber's inbox consumer (its subscription's
// name, as WORKER_INBOX_CONSUMER) and the container of its markers; both
// subscriptions exist from the first deployment, before any event, so no
// creation time is given. The audit bounds itself (AUDIT_TIMEOUT, 1 h by
// default: it then prints what it found and its continuation and exits 2),
// inside the replica's two hours.
resource audit 'Microsoft.App/jobs@2025-01-01' = {
  name: auditName
  location: location
  tags: union(tags, {
    'azd-service-name': 'audit'
  })
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${auditIdentityId}': {}
    }
  }
  properties: {
    environmentId: environment.id
    workloadProfileName: 'Consumption'
    configuration: {
      triggerType: 'Schedule'
      replicaTimeout: auditReplicaTimeout
      replicaRetryLimit: 0
      scheduleTriggerConfig: {
        cronExpression: auditSchedule
        parallelism: 1
        replicaCompletionCount: 1
      }
      registries: [
        {
          server: registryServer
          identity: auditIdentityId
        }
      ]
    }
    template: {
      containers: [
        {
          name: 'audit'
          image: auditImage
          args: [
            'audit'
          ]
          resources: {
            cpu: json('0.25')
            memory: smallMemory
          }
          env: [
            {
              name: 'AZURE_CLIENT_ID'
              value: auditClientId
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
              name: 'COSMOS_LEASES_CONTAINER'
              value: cosmosLeasesContainerName
            }
            {
              name: 'AUDIT_CONSUMERS'
              value: '${loyaltySubscriptionName}=${cosmosLoyaltyContainerName},${shippingSubscriptionName}=${cosmosShippingContainerName}'
            }
            {
              name: 'SERVICEBUS_LOCK_DURATION'
              value: lockDuration
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
            {
              name: 'OTEL_METRICS_EXPORTER'
              value: otlpMetricsExporter
            }
            {
              name: 'OTEL_LOGS_EXPORTER'
              value: otlpLogsExporter
            }
            {
              name: 'GOGC'
              value: goGC
            }
            {
              name: 'GOMEMLIMIT'
              value: smallGoMemLimit
            }
          ]
        }
      ]
    }
  }
}

// The relay reads the orders container's change feed and publishes each
// change to the topic. It holds an ETag-guarded lease per feed range, so
// another replica only takes over ranges whose lease lapsed, never publishes
// a range twice at once. It has no scale rule: the change feed is polled,
// not pushed, so it must always run (min = max = relayReplicas: one in dev,
// one per zone in production).
resource relay 'Microsoft.App/containerApps@2025-01-01' = {
  name: relayName
  location: location
  tags: union(tags, {
    'azd-service-name': 'relay'
  })
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${relayIdentityId}': {}
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
          identity: relayIdentityId
        }
      ]
    }
    template: {
      containers: [
        {
          name: 'relay'
          image: relayImage
          resources: {
            cpu: json('0.25')
            memory: smallMemory
          }
          env: [
            {
              name: 'AZURE_CLIENT_ID'
              value: relayClientId
            }
            {
              name: 'SERVICEBUS_NAMESPACE'
              value: serviceBusHost
            }
            {
              name: 'SERVICEBUS_TOPIC'
              value: topicName
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
              name: 'COSMOS_LEASES_CONTAINER'
              value: cosmosLeasesContainerName
            }
            {
              name: 'LOG_FORMAT'
              value: 'json'
            }
            {
              name: 'OTEL_LOGS_EXPORTER'
              value: otlpLogsExporter
            }
            {
              name: 'GOGC'
              value: goGC
            }
            {
              name: 'GOMEMLIMIT'
              value: smallGoMemLimit
            }
            {
              name: 'OTEL_SERVICE_NAME'
              value: 'orderrelay'
            }
            {
              name: 'OTEL_METRICS_EXPORTER'
              value: otlpMetricsExporter
            }
            {
              name: 'RELAY_HEALTH_ADDR'
              value: ':${healthPort}'
            }
          ]
          // The relay serves the same three endpoints on the same port; its
          // /livez fails only when its loop has not ended a poll for minutes.
          // Like the other apps, probed only on its deployed image: the
          // bootstrap image serves none of the paths, and the relay is the
          // one app with a replica from the first provisioning on, whose
          // revision would never become ready.
          probes: relayExists ? workerProbes : []
        }
      ]
      terminationGracePeriodSeconds: terminationGracePeriodSeconds
      scale: {
        minReplicas: relayReplicas
        maxReplicas: relayReplicas
      }
    }
  }
}

// The loyalty subscriber: the worker in inbox mode on the loyalty subscription,
// with its own identity (Data Receiver on that subscription only, and the
// Cosmos DB data role for its inbox markers) and the scaler identity for its
// KEDA rule, kept out of the container as on the worker.
resource loyalty 'Microsoft.App/containerApps@2025-01-01' = {
  name: loyaltyName
  location: location
  tags: union(tags, {
    'azd-service-name': 'loyalty'
  })
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${loyaltyIdentityId}': {}
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
          identity: loyaltyIdentityId
        }
      ]
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
          name: 'loyalty'
          image: loyaltyImage
          resources: {
            cpu: json('0.25')
            memory: smallMemory
          }
          env: [
            {
              name: 'AZURE_CLIENT_ID'
              value: loyaltyClientId
            }
            {
              name: 'SERVICEBUS_NAMESPACE'
              value: serviceBusHost
            }
            {
              name: 'SERVICEBUS_TOPIC'
              value: topicName
            }
            {
              name: 'SERVICEBUS_SUBSCRIPTION'
              value: loyaltySubscriptionName
            }
            {
              name: 'WORKER_INBOX_CONSUMER'
              value: loyaltySubscriptionName
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
              value: cosmosLoyaltyContainerName
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
            {
              name: 'OTEL_LOGS_EXPORTER'
              value: otlpLogsExporter
            }
            {
              name: 'GOGC'
              value: goGC
            }
            {
              name: 'GOMEMLIMIT'
              value: smallGoMemLimit
            }
            {
              name: 'OTEL_SERVICE_NAME'
              value: 'orderworker-loyalty'
            }
            {
              name: 'OTEL_METRICS_EXPORTER'
              value: otlpMetricsExporter
            }
            {
              name: 'WORKER_HEALTH_ADDR'
              value: ':${healthPort}'
            }
            {
              name: 'WORKER_SHUTDOWN_GRACE'
              value: workerShutdownGrace
            }
          ]
          probes: loyaltyExists ? workerProbes : []
        }
      ]
      terminationGracePeriodSeconds: terminationGracePeriodSeconds
      scale: {
        minReplicas: 0
        maxReplicas: subscriberMaxReplicas
        rules: [
          {
            name: 'loyalty-subscription-length'
            custom: {
              type: 'azure-servicebus'
              identity: scalerIdentityId
              metadata: {
                namespace: serviceBusNamespaceName
                topicName: topicName
                subscriptionName: loyaltySubscriptionName
                messageCount: string(scaleMessageCount)
              }
            }
          }
        ]
      }
    }
  }
}

// The shipping subscriber: the worker in inbox mode on the shipping subscription,
// with its own identity (Data Receiver on that subscription only, and the
// Cosmos DB data role for its inbox markers) and the scaler identity for its
// KEDA rule, kept out of the container as on the worker.
resource shipping 'Microsoft.App/containerApps@2025-01-01' = {
  name: shippingName
  location: location
  tags: union(tags, {
    'azd-service-name': 'shipping'
  })
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${shippingIdentityId}': {}
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
          identity: shippingIdentityId
        }
      ]
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
          name: 'shipping'
          image: shippingImage
          resources: {
            cpu: json('0.25')
            memory: smallMemory
          }
          env: [
            {
              name: 'AZURE_CLIENT_ID'
              value: shippingClientId
            }
            {
              name: 'SERVICEBUS_NAMESPACE'
              value: serviceBusHost
            }
            {
              name: 'SERVICEBUS_TOPIC'
              value: topicName
            }
            {
              name: 'SERVICEBUS_SUBSCRIPTION'
              value: shippingSubscriptionName
            }
            {
              name: 'WORKER_INBOX_CONSUMER'
              value: shippingSubscriptionName
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
              value: cosmosShippingContainerName
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
            {
              name: 'OTEL_LOGS_EXPORTER'
              value: otlpLogsExporter
            }
            {
              name: 'GOGC'
              value: goGC
            }
            {
              name: 'GOMEMLIMIT'
              value: smallGoMemLimit
            }
            {
              name: 'OTEL_SERVICE_NAME'
              value: 'orderworker-shipping'
            }
            {
              name: 'OTEL_METRICS_EXPORTER'
              value: otlpMetricsExporter
            }
            {
              name: 'WORKER_HEALTH_ADDR'
              value: ':${healthPort}'
            }
            {
              name: 'WORKER_SHUTDOWN_GRACE'
              value: workerShutdownGrace
            }
          ]
          probes: shippingExists ? workerProbes : []
        }
      ]
      terminationGracePeriodSeconds: terminationGracePeriodSeconds
      scale: {
        minReplicas: 0
        maxReplicas: subscriberMaxReplicas
        rules: [
          {
            name: 'shipping-subscription-length'
            custom: {
              type: 'azure-servicebus'
              identity: scalerIdentityId
              metadata: {
                namespace: serviceBusNamespaceName
                topicName: topicName
                subscriptionName: shippingSubscriptionName
                messageCount: string(scaleMessageCount)
              }
            }
          }
        ]
      }
    }
  }
}

@description('Worker container app name.')
output workerName string = worker.name

@description('Producer job name; start a run with `az containerapp job start`.')
output producerName string = producer.name

@description('Relay container app name.')
output relayName string = relay.name

@description('orderctl job name; start a run with `az containerapp job start`.')
output orderctlName string = orderctl.name

@description('Audit job name, for the audit alerts; start an extra run with `az containerapp job start`.')
output auditName string = audit.name

@description('Loyalty subscriber container app name.')
output loyaltyName string = loyalty.name

@description('Shipping subscriber container app name.')
output shippingName string = shipping.name

@description('Worker container app resource id, for the restart alert.')
output workerId string = worker.id

@description('Relay container app resource id, for the restart alert.')
output relayId string = relay.id

@description('Loyalty subscriber container app resource id, for the restart alert.')
output loyaltyId string = loyalty.id

@description('Shipping subscriber container app resource id, for the restart alert.')
output shippingId string = shipping.id
