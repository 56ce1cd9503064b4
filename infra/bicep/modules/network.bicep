// network.bicep is the production profile's network: a virtual network with
// a subnet delegated to the Container Apps environment and a subnet for
// private endpoints, each with a network security group, a private endpoint each for the Service Bus namespace
// and the Cosmos DB account, and the private DNS zones that resolve their
// public names to those endpoints inside the network. With it, both
// services turn public network access off (servicebus.bicep, cosmos.bicep):
// only the environment's apps, inside the network, reach them.
//
// Zone names and group ids are those Microsoft documents for the two
// services' private endpoints ("Azure Private Endpoint private DNS zone
// values"): privatelink.servicebus.windows.net with group namespace, and
// privatelink.documents.azure.com with group Sql.

@description('Virtual network name.')
param name string

@description('Azure region.')
param location string

@description('Tags for every resource.')
param tags object = {}

@description('Resource id of the Service Bus namespace that gets a private endpoint.')
param serviceBusNamespaceId string

@description('Resource id of the Cosmos DB account that gets a private endpoint.')
param cosmosAccountId string

@description('Address space of the virtual network.')
param addressPrefix string = '10.40.0.0/16'

@description('Subnet of the Container Apps environment: a workload-profiles environment needs at least a /27, delegated to Microsoft.App/environments.')
param infrastructurePrefix string = '10.40.0.0/23'

@description('Subnet of the private endpoints.')
param privateEndpointPrefix string = '10.40.2.0/24'

var endpoints = [
  {
    name: 'servicebus'
    id: serviceBusNamespaceId
    groupId: 'namespace'
    zone: 'privatelink.servicebus.windows.net'
  }
  {
    name: 'cosmos'
    id: cosmosAccountId
    groupId: 'Sql'
    zone: 'privatelink.documents.azure.com'
  }
]

// A network security group on each subnet. Their rules are Azure's default
// rules (inbound from the virtual network and the load balancer, outbound to
// the virtual network and the internet; everything else inbound denied): the
// apps have no ingress and reach Service Bus and Cosmos DB through the
// private endpoints in the same network. Container Apps supports network
// security groups on a custom virtual network's subnet; the rules it lists
// for one are needed only when outbound traffic is restricted beyond the
// defaults. The private endpoints' subnet keeps network policies off, so its
// group's rules do not apply to the endpoints themselves; the group is there
// for the subnet's other traffic and for policies that require one.
resource infrastructureNsg 'Microsoft.Network/networkSecurityGroups@2024-07-01' = {
  name: 'nsg-infrastructure-${name}'
  location: location
  tags: tags
}

resource endpointsNsg 'Microsoft.Network/networkSecurityGroups@2024-07-01' = {
  name: 'nsg-private-endpoints-${name}'
  location: location
  tags: tags
}

resource vnet 'Microsoft.Network/virtualNetworks@2024-07-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    addressSpace: {
      addressPrefixes: [
        addressPrefix
      ]
    }
    subnets: [
      {
        name: 'infrastructure'
        properties: {
          addressPrefix: infrastructurePrefix
          delegations: [
            {
              name: 'container-apps'
              properties: {
                serviceName: 'Microsoft.App/environments'
              }
            }
          ]
          networkSecurityGroup: {
            id: infrastructureNsg.id
          }
        }
      }
      {
        name: 'private-endpoints'
        properties: {
          addressPrefix: privateEndpointPrefix
          privateEndpointNetworkPolicies: 'Disabled'
          networkSecurityGroup: {
            id: endpointsNsg.id
          }
        }
      }
    ]
  }
}

resource zones 'Microsoft.Network/privateDnsZones@2024-06-01' = [for e in endpoints: {
  name: e.zone
  location: 'global'
  tags: tags
}]

resource links 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2024-06-01' = [for (e, i) in endpoints: {
  parent: zones[i]
  name: '${name}-link'
  location: 'global'
  tags: tags
  properties: {
    registrationEnabled: false
    virtualNetwork: {
      id: vnet.id
    }
  }
}]

resource privateEndpoints 'Microsoft.Network/privateEndpoints@2024-07-01' = [for e in endpoints: {
  name: 'pe-${e.name}-${name}'
  location: location
  tags: tags
  properties: {
    subnet: {
      id: '${vnet.id}/subnets/private-endpoints'
    }
    privateLinkServiceConnections: [
      {
        name: e.name
        properties: {
          privateLinkServiceId: e.id
          groupIds: [
            e.groupId
          ]
        }
      }
    ]
  }
}]

resource dnsGroups 'Microsoft.Network/privateEndpoints/privateDnsZoneGroups@2024-07-01' = [for (e, i) in endpoints: {
  parent: privateEndpoints[i]
  name: 'default'
  properties: {
    privateDnsZoneConfigs: [
      {
        name: replace(e.zone, '.', '-')
        properties: {
          privateDnsZoneId: zones[i].id
        }
      }
    ]
  }
}]

@description('Resource id of the subnet the Container Apps environment runs in.')
output infrastructureSubnetId string = '${vnet.id}/subnets/infrastructure'
