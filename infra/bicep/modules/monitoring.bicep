// monitoring.bicep creates the Log Analytics workspace that receives the
// container apps' stdout. The programs write JSON logs (LOG_FORMAT=json), so
// each field becomes queryable in ContainerAppConsoleLogs_CL.

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
  }
}

@description('Workspace name, for the Container Apps environment to look up.')
output name string = workspace.name
