// cosmos.bicep creates a serverless Cosmos DB for NoSQL account, the orders
// database and container, and grants the worker the built-in data role.
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

@description('Principal that reads and writes orders: the worker.')
param workerPrincipalId string

@description('Optional developer principal that gets the same data role, to run the worker locally. Empty grants nothing.')
param developerPrincipalId string = ''

// Cosmos DB Built-in Data Contributor: read, write and query items, read
// metadata. It cannot create or delete databases or containers.
var dataContributorRoleId = '00000000-0000-0000-0000-000000000002'

resource account 'Microsoft.DocumentDB/databaseAccounts@2025-04-15' = {
  name: name
  location: location
  tags: tags
  kind: 'GlobalDocumentDB'
  properties: {
    databaseAccountOfferType: 'Standard'
    capabilities: [
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
        isZoneRedundant: false
      }
    ]
    disableLocalAuth: true
    disableKeyBasedMetadataWriteAccess: true
    minimalTlsVersion: 'Tls12'
    publicNetworkAccess: 'Enabled'
  }
}

resource database 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases@2025-04-15' = {
  parent: account
  name: databaseName
  properties: {
    resource: {
      id: databaseName
    }
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
      indexingPolicy: {
        indexingMode: 'consistent'
        automatic: true
        includedPaths: [
          {
            path: '/*'
          }
        ]
        excludedPaths: [
          {
            path: '/"_etag"/?'
          }
        ]
      }
    }
  }
}

// The role is scoped to the database, not the account. A narrower container
// scope breaks SDK calls that read the database's metadata.
//
// Cosmos DB runs one control-plane write per account at a time and answers a
// concurrent one with "another operation is in progress", so the database,
// the container and both role assignments are chained: database -> container
// -> worker's assignment -> developer's assignment.
var dataScope = '${account.id}/dbs/${databaseName}'

resource workerReadsWritesOrders 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-11-15' = {
  parent: account
  name: guid(account.id, workerPrincipalId, dataContributorRoleId)
  properties: {
    roleDefinitionId: '${account.id}/sqlRoleDefinitions/${dataContributorRoleId}'
    principalId: workerPrincipalId
    scope: dataScope
  }
  dependsOn: [
    container
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
    workerReadsWritesOrders
  ]
}

@description('Account endpoint (documentEndpoint), e.g. https://cosmos-x.documents.azure.com:443/.')
output endpoint string = account.properties.documentEndpoint

@description('Database name.')
output databaseName string = database.name

@description('Container name.')
output containerName string = container.name
