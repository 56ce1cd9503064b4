// registry.bicep creates the container registry azd pushes images to, and
// grants AcrPull to the identities the container apps pull with. The admin
// user stays disabled: pulls use managed identities, pushes use the deploying
// developer's own sign-in.

@description('Registry name (alphanumeric, globally unique).')
param name string

@description('Azure region.')
param location string

@description('Tags for the registry.')
param tags object = {}

@description('Object ids of the identities that pull images.')
param pullPrincipalIds array

// AcrPull: pull images, nothing else.
var acrPullRoleId = '7f951dda-4ed3-4680-a7ca-43fe172d538d'

resource registry 'Microsoft.ContainerRegistry/registries@2023-07-01' = {
  name: name
  location: location
  tags: tags
  sku: {
    name: 'Basic'
  }
  properties: {
    adminUserEnabled: false
  }
}

resource pulls 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for principalId in pullPrincipalIds: {
  scope: registry
  name: guid(registry.id, principalId, acrPullRoleId)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', acrPullRoleId)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}]

@description('Login server, e.g. crx.azurecr.io; azd reads it as AZURE_CONTAINER_REGISTRY_ENDPOINT.')
output loginServer string = registry.properties.loginServer
