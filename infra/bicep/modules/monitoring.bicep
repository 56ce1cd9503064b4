// monitoring.bicep creates the Log Analytics workspace that receives the
// container apps' console output (stdout and stderr; the programs log JSON to
// stderr with LOG_FORMAT=json). The Container Apps environment's azure-monitor
// destination and its diagnostic setting write it to the resource-specific
// table ContainerAppConsoleLogs (not ContainerAppConsoleLogs_CL, which is the
// log-analytics destination's table).
//
// Local auth is disabled: nothing may ingest or query with the workspace's
// shared keys, only with Microsoft Entra identities and Azure RBAC.
//
// Application Insights is workspace-based: its data lives in this workspace
// (AppTraces, AppRequests, AppDependencies, ...). The Container Apps
// environment's managed OpenTelemetry agent sends the programs' traces to it.
// That agent can only ingest with the connection string's instrumentation
// key, so Application Insights keeps local authentication on (the agent's
// documented requirement); the instrumentation key identifies the resource
// and is not a secret, and the workspace behind it still refuses shared keys.

@description('Workspace name.')
param name string

@description('Azure region.')
param location string

@description('Tags for the workspace.')
param tags object = {}

@description('Application Insights component name.')
param appInsightsName string

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

resource appInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: appInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'other'
    WorkspaceResourceId: workspace.id
    IngestionMode: 'LogAnalytics'
    RetentionInDays: retentionInDays
    DisableLocalAuth: false
    publicNetworkAccessForIngestion: 'Enabled'
    publicNetworkAccessForQuery: 'Enabled'
  }
}

@description('Workspace name, for the Container Apps environment to look up.')
output name string = workspace.name

@description('Workspace resource id, for the diagnostic settings.')
output id string = workspace.id

@description('Application Insights component name, for the Container Apps environment to look up.')
output appInsightsName string = appInsights.name
