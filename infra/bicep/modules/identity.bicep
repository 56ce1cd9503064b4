// identity.bicep creates one user-assigned managed identity. Each program and
// the KEDA scaler get their own, so each can be granted exactly the roles it
// uses and nothing more.

@description('Name of the identity.')
param name string

@description('Azure region.')
param location string

@description('Tags for the identity.')
param tags object = {}

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: name
  location: location
  tags: tags
}

@description('Resource id, for attaching the identity to a container app or a scale rule.')
output id string = identity.id

@description('Client id; a program selects this identity by setting AZURE_CLIENT_ID to it.')
output clientId string = identity.properties.clientId

@description('Object (principal) id, for role assignments.')
output principalId string = identity.properties.principalId
