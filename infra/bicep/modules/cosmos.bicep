// cosmos.bicep creates a serverless Cosmos DB for NoSQL account, the orders
// database with the orders container, the relay's leases container and one
// container per subscriber, grants each identity data access to its own
// containers only, and sends the account's logs to Log Analytics.
//
// The container is the single arbiter of idempotency: the worker creates one
// document per order with id = partition key value = order id, and a second
// create of the same id fails with 409. Partition key /orderId (Hash, v2) keeps
// an order and every document written with it in one logical partition, so a
// transactional batch can write them all or nothing. defaultTtl -1 turns TTL on
// without expiring anything by default: only documents that set their own ttl
// (for example in-progress markers) expire.
//
// Local (key) auth is disabled and key-based metadata writes are refused, so
// the database and container exist only because this template creates them;
// the worker needs data-plane rights only.

@description('Account name.')
param name string

@description('Azure region.')
param location string

@description('Tags for every resource.')
param tags object = {}

@description('Database name.')
param databaseName string

@description('Container name.')
param containerName string

@description('Container of the relay\'s lease documents.')
param leasesContainerName string

@description('Container of the loyalty subscriber\'s inbox markers and entries.')
param loyaltyContainerName string

@description('Container of the shipping subscriber\'s inbox markers and entries.')
param shippingContainerName string

@description('Principal that reads and writes orders: the worker.')
param workerPrincipalId string

@description('Principal that reads the orders container\'s change feed and writes its lease documents in the leases container: the relay.')
param relayPrincipalId string

@description('Principal that writes the loyalty subscriber\'s inbox markers in its container.')
param loyaltyPrincipalId string

@description('Principal that writes the shipping subscriber\'s inbox markers in its container.')
param shippingPrincipalId string

@description('Principal of the operator tool orderctl, which reads stored orders (dlq show compares a mismatch with the stored order).')
param operatorPrincipalId string

@description('Principal of the scheduled audit (orderctl audit), which reads every container of the database: orders, payment records, events, leases and inbox markers.')
param auditPrincipalId string

@description('Resource id of the Log Analytics workspace that receives the account\'s logs.')
param logAnalyticsWorkspaceId string

@minValue(1000)
@description('Production profile: the database\'s autoscale maximum, in RU/s (it scales between a tenth of it and it).')
param autoscaleMaxThroughput int = 1000

@description('Optional developer principal that gets the same data role, to run the worker locally. Empty grants nothing.')
param developerPrincipalId string = ''

@allowed([
  'dev'
  'production'
])
@description('Deployment profile: dev (the default) or production (see main.bicep).')
param profile string = 'dev'

var production = profile == 'production'

// Cosmos DB Built-in Data Contributor: read, write and query items, read
// metadata. It cannot create or delete databases or containers.
var dataContributorRoleId = '00000000-0000-0000-0000-000000000002'

// Cosmos DB Built-in Data Reader: read and query items, read metadata.
var dataReaderRoleId = '00000000-0000-0000-0000-000000000001'

// The data actions of the two custom roles (Azure Cosmos DB for NoSQL data
// plane actions reference): the relay reads the orders container's change
// feed and nothing else there, and every identity whose data role is scoped
// to a container reads the database's metadata, which the SDKs read for a
// change feed and a container (azure-cosmos-dotnet-v3 #3638: a role scoped
// to a container alone answers 403 on dbs/<db> readMetadata).
var readMetadataAction = 'Microsoft.DocumentDB/databaseAccounts/readMetadata'
var feedReaderActions = [
  readMetadataAction
  'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/items/read'
  'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/readChangeFeed'
]

resource account 'Microsoft.DocumentDB/databaseAccounts@2025-04-15' = {
  name: name
  location: location
  tags: tags
  kind: 'GlobalDocumentDB'
  properties: {
    databaseAccountOfferType: 'Standard'
    // dev: serverless (no minimum charge). production: provisioned
    // autoscale throughput on the database (below), which zone redundancy
    // is documented for, continuous backup (point-in-time restore over the
    // last 7 days) and no public network access (a private endpoint,
    // network.bicep).
    capabilities: production ? [] : [
      {
        name: 'EnableServerless'
      }
    ]
    consistencyPolicy: {
      defaultConsistencyLevel: 'Session'
    }
    locations: [
      {
        locationName: location
        failoverPriority: 0
        isZoneRedundant: production
      }
    ]
    backupPolicy: production ? {
      type: 'Continuous'
      continuousModeProperties: {
        tier: 'Continuous7Days'
      }
    } : null
    // One write region, always: the pattern's create is the arbiter of
    // "already processed" only within one; with several, two regions could
    // each accept the same id (the store's Check refuses such an account).
    enableMultipleWriteLocations: false
    disableLocalAuth: true
    disableKeyBasedMetadataWriteAccess: true
    minimalTlsVersion: 'Tls12'
    publicNetworkAccess: production ? 'Disabled' : 'Enabled'
  }
}

resource database 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases@2025-04-15' = {
  parent: account
  name: databaseName
  properties: {
    resource: {
      id: databaseName
    }
    // Serverless has no throughput to set; production shares autoscale
    // throughput (1,000 RU/s at most, 100 at least) across the container.
    options: production ? {
      autoscaleSettings: {
        maxThroughput: autoscaleMaxThroughput
      }
    } : {}
  }
}

resource container 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2025-04-15' = {
  parent: database
  name: containerName
  properties: {
    resource: {
      id: containerName
      partitionKey: {
        paths: [
          '/orderId'
        ]
        kind: 'Hash'
        version: 2
      }
      defaultTtl: -1
      // Nothing queries this container: the worker, the subscribers, the
      // relay and orderctl read by id and partition key (point reads),
      // create, replace and patch single items, write transactional batches
      // and read the change feed, none of which uses the index. So no path
      // is indexed: each indexed term costs a write about 0.2 RU on top of
      // the document's own ~5 RU per KB (Microsoft's figures, infra/README.md).
      // The mode stays consistent, which keeps id and _ts indexed and
      // lets a path be added later (a query would need one).
      indexingPolicy: {
        indexingMode: 'consistent'
        automatic: true
        includedPaths: []
        excludedPaths: [
          {
            path: '/*'
          }
        ]
      }
    }
  }
}

// The relay's leases and each subscriber's inbox markers and entries live
// in containers of their own, partitioned like the orders container (their
// documents carry orderId), so that each identity's data role can be scoped
// to the containers it writes. They are created one after the other (see
// the chain below).
var ownContainerNames = [
  leasesContainerName
  loyaltyContainerName
  shippingContainerName
]

@batchSize(1)
resource ownContainers 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2025-04-15' = [
  for name in ownContainerNames: {
    parent: database
    name: name
    properties: {
      resource: {
        id: name
        partitionKey: {
          paths: [
            '/orderId'
          ]
          kind: 'Hash'
          version: 2
        }
        defaultTtl: -1
        // Indexed like the orders container, for the same reason: nothing
        // queries these documents either.
        indexingPolicy: {
          indexingMode: 'consistent' // as the orders container's
          automatic: true
          includedPaths: [] // none
          excludedPaths: [
            {
              path: '/*' // every path
            }
          ]
        }
      }
    }
    dependsOn: [
      container
    ]
  }
]

// The custom roles: the relay's read-only access to the orders container,
// and the database metadata that identities scoped to containers need.
resource feedReaderRole 'Microsoft.DocumentDB/databaseAccounts/sqlRoleDefinitions@2024-11-15' = {
  parent: account
  name: guid(account.id, 'orders-change-feed-reader')
  properties: {
    roleName: 'Orders change feed reader'
    type: 'CustomRole'
    assignableScopes: [
      account.id
    ]
    permissions: [
      {
        dataActions: feedReaderActions
      }
    ]
  }
  dependsOn: [
    ownContainers
  ]
}

resource metadataReaderRole 'Microsoft.DocumentDB/databaseAccounts/sqlRoleDefinitions@2024-11-15' = {
  parent: account
  name: guid(account.id, 'metadata-reader')
  properties: {
    roleName: 'Database metadata reader'
    type: 'CustomRole'
    assignableScopes: [
      account.id
    ]
    permissions: [
      {
        dataActions: [
          readMetadataAction
        ]
      }
    ]
  }
  dependsOn: [
    feedReaderRole
  ]
}

// Every identity's data role is scoped to the containers it uses (only the
// developer's, for running every program locally, and the read-only
// orderctl's and audit's are scoped to the database). The worker reads and
// writes the orders container (orders, payment records, events): scoped to
// the database it could also rewrite the relay's leases and delete the
// subscribers' inbox markers, and a deleted marker lets an event take
// effect twice. The relay reads the orders container's
// change feed (the custom feed reader role: no write, no query) and writes
// its leases in the leases container; each subscriber reads and writes its
// own container only, so no subscriber can rewrite orders or payment
// records. Each of them also reads the database's metadata (the custom
// metadata reader role at database scope: no item).
//
// Cosmos DB runs one control-plane write per account at a time and answers a
// concurrent one with "another operation is in progress", so the database,
// the containers, the role definitions and every role assignment are
// chained: database -> container -> own containers -> roles -> worker
// (metadata, orders) -> relay (metadata, orders, leases) -> loyalty (metadata, container) ->
// shipping (metadata, container) -> orderctl -> audit -> developer.
var dataScope = '${account.id}/dbs/${databaseName}'
var ordersScope = '${dataScope}/colls/${containerName}'
var leasesScope = '${dataScope}/colls/${leasesContainerName}'
var loyaltyScope = '${dataScope}/colls/${loyaltyContainerName}'
var shippingScope = '${dataScope}/colls/${shippingContainerName}'

resource workerReadsMetadata 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-11-15' = {
  parent: account
  name: guid(account.id, workerPrincipalId, 'metadata-reader')
  properties: {
    roleDefinitionId: metadataReaderRole.id
    principalId: workerPrincipalId
    scope: dataScope
  }
  dependsOn: [
    metadataReaderRole
  ]
}

resource workerReadsWritesOrders 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-11-15' = {
  parent: account
  name: guid(account.id, workerPrincipalId, dataContributorRoleId)
  properties: {
    roleDefinitionId: '${account.id}/sqlRoleDefinitions/${dataContributorRoleId}'
    principalId: workerPrincipalId
    scope: ordersScope
  }
  dependsOn: [
    workerReadsMetadata
  ]
}

resource relayReadsMetadata 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-11-15' = {
  parent: account
  name: guid(account.id, relayPrincipalId, 'metadata-reader')
  properties: {
    roleDefinitionId: metadataReaderRole.id
    principalId: relayPrincipalId
    scope: dataScope
  }
  dependsOn: [
    workerReadsWritesOrders
  ]
}

resource relayReadsFeed 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-11-15' = {
  parent: account
  name: guid(account.id, relayPrincipalId, 'orders-change-feed-reader')
  properties: {
    roleDefinitionId: feedReaderRole.id
    principalId: relayPrincipalId
    scope: ordersScope
  }
  dependsOn: [
    relayReadsMetadata
  ]
}

resource relayWritesLeases 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-11-15' = {
  parent: account
  name: guid(account.id, relayPrincipalId, dataContributorRoleId)
  properties: {
    roleDefinitionId: '${account.id}/sqlRoleDefinitions/${dataContributorRoleId}'
    principalId: relayPrincipalId
    scope: leasesScope
  }
  dependsOn: [
    relayReadsFeed
  ]
}

resource loyaltyReadsMetadata 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-11-15' = {
  parent: account
  name: guid(account.id, loyaltyPrincipalId, 'metadata-reader')
  properties: {
    roleDefinitionId: metadataReaderRole.id
    principalId: loyaltyPrincipalId
    scope: dataScope
  }
  dependsOn: [
    relayWritesLeases
  ]
}

resource loyaltyWritesInbox 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-11-15' = {
  parent: account
  name: guid(account.id, loyaltyPrincipalId, dataContributorRoleId)
  properties: {
    roleDefinitionId: '${account.id}/sqlRoleDefinitions/${dataContributorRoleId}'
    principalId: loyaltyPrincipalId
    scope: loyaltyScope
  }
  dependsOn: [
    loyaltyReadsMetadata
  ]
}

resource shippingReadsMetadata 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-11-15' = {
  parent: account
  name: guid(account.id, shippingPrincipalId, 'metadata-reader')
  properties: {
    roleDefinitionId: metadataReaderRole.id
    principalId: shippingPrincipalId
    scope: dataScope
  }
  dependsOn: [
    loyaltyWritesInbox
  ]
}

resource shippingWritesInbox 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-11-15' = {
  parent: account
  name: guid(account.id, shippingPrincipalId, dataContributorRoleId)
  properties: {
    roleDefinitionId: '${account.id}/sqlRoleDefinitions/${dataContributorRoleId}'
    principalId: shippingPrincipalId
    scope: shippingScope
  }
  dependsOn: [
    shippingReadsMetadata
  ]
}

resource operatorReadsOrders 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-11-15' = {
  parent: account
  name: guid(account.id, operatorPrincipalId, dataReaderRoleId)
  properties: {
    roleDefinitionId: '${account.id}/sqlRoleDefinitions/${dataReaderRoleId}'
    principalId: operatorPrincipalId
    scope: dataScope
  }
  dependsOn: [
    shippingWritesInbox
  ]
}

// The audit reads what the simulation's invariants are about: the orders
// container (orders, payment records, events), the relay's leases and each
// subscriber's inbox markers, so its read-only role is scoped to the
// database. Data Reader cannot write, delete or change a container.
resource auditReadsDatabase 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-11-15' = {
  parent: account
  name: guid(account.id, auditPrincipalId, dataReaderRoleId)
  properties: {
    roleDefinitionId: '${account.id}/sqlRoleDefinitions/${dataReaderRoleId}'
    principalId: auditPrincipalId
    scope: dataScope
  }
  dependsOn: [
    operatorReadsOrders
  ]
}

resource developerReadsWritesOrders 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-11-15' = if (!empty(developerPrincipalId)) {
  parent: account
  name: guid(account.id, developerPrincipalId, dataContributorRoleId)
  properties: {
    roleDefinitionId: '${account.id}/sqlRoleDefinitions/${dataContributorRoleId}'
    principalId: developerPrincipalId
    scope: dataScope
  }
  dependsOn: [
    auditReadsDatabase
  ]
}

// Resource-specific tables (CDBDataPlaneRequests, ...) rather than the
// legacy AzureDiagnostics table.
resource accountDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  scope: account
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
  }
}

@description('Account endpoint (documentEndpoint), e.g. https://cosmos-x.documents.azure.com:443/.')
output endpoint string = account.properties.documentEndpoint

@description('Database name.')
output databaseName string = database.name

@description('Container name.')
output containerName string = container.name

@description('Leases container name.')
output leasesContainerName string = leasesContainerName

@description('Loyalty subscriber\'s container name.')
output loyaltyContainerName string = loyaltyContainerName

@description('Shipping subscriber\'s container name.')
output shippingContainerName string = shippingContainerName

@description('Account resource id, for the metric alerts.')
output id string = account.id
