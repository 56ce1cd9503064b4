// monitoring.bicep creates the Log Analytics workspace that receives the
// container apps' console output (stdout and stderr; the programs log JSON to
// stderr with LOG_FORMAT=json). The Container Apps environment's azure-monitor
// destination and its diagnostic setting write it to the resource-specific
// table ContainerAppConsoleLogs (not ContainerAppConsoleLogs_CL, which is the
// log-analytics destination's table).
//
// Local auth is disabled: nothing may ingest or query with the workspace's
// shared keys, only with Microsoft Entra identities and Azure RBAC.

@description('Workspace name.')
param name string

@description('Azure region.')
param location string

@description('Tags for the workspace.')
param tags object = {}

@minValue(30)
@maxValue(730)
@description('Days to keep logs. 30 is included in the ingestion price.')
param retentionInDays int = 30

resource workspace 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: retentionInDays
    features: {
      disableLocalAuth: true
    }
  }
}

@description('Workspace name, for the Container Apps environment to look up.')
output name string = workspace.name
