package order

// PartitionKeyPath is the partition key path of the orders container: every
// document of an order (the order document, its OrderAccepted event, its
// payment records, its consumers' inbox markers and business writes) carries
// the order id in its orderId field, so that they share one logical
// partition. cosmosstore.New and cosmosstore.CreateDatabaseAndContainer take
// it for the orders container, and the Bicep template deploys the container
// with it.
const PartitionKeyPath = "/orderId"
