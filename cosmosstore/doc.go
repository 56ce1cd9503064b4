// Package cosmosstore implements order.Store on Azure Cosmos DB for NoSQL with
// the azcosmos SDK.
//
// # Document layout
//
// Every document of an order lives in one logical partition: the container's
// partition key path is /orderId ([PartitionKeyPath]), and the order document's
// id is the order id, so id = orderId = partition key value. The OrderAccepted
// outbox event (id "OrderAccepted:" + orderId) shares the partition, so
// [Store.CreateOrder] writes both in one transactional batch: both or neither.
// The order document is the idempotency marker; because its id is the order
// id, a second create of the same order conflicts.
//
// # Status codes
//
// The store turns Cosmos DB status codes into the sentinel errors of package
// order, by status code and never by the text of a message:
//
//	201 (every batch operation)          nil
//	409 Conflict                         order.ErrAlreadyExists
//	404 Not Found, on a read             order.ErrNotFound
//	429, 503, 408, 449                   order.ErrTransient
//	lost or refused connection, timeout  order.ErrTransient
//	anything else                        a permanent error
//
// A failed transactional batch reports the operation that caused the failure
// with its own status code and every other operation with 424 (Failed
// Dependency); the store reports the first operation whose status is neither
// 2xx nor 424. Every error the store returns is an [*Error], which names the
// call, the order, the batch operation, the status code and the activity id
// that Azure support asks for.
//
// # Request charge
//
// The store adds up the request units (RU) that Cosmos DB charges for every
// call, including failed ones; [Store.RequestCharge] returns the running
// total.
//
// # Connecting
//
// In Azure the worker authenticates with Microsoft Entra ID ([NewClient] with
// an azidentity credential) and holds only the data-plane role Cosmos DB Built-in
// Data Contributor, which cannot create databases or containers: Bicep creates
// them. [NewClientWithKey] and [NewClientFromConnectionString] are for the
// emulators, and [CreateDatabaseAndContainer] creates the database and
// container there.
//
// # Concurrency and idempotency
//
// A [Store] is safe for concurrent use. CreateOrder is safe to call any number
// of times, concurrently, for the same order: Cosmos DB's atomic batch lets
// exactly one call write the documents, and every other call writes nothing and
// returns an error matching order.ErrAlreadyExists.
package cosmosstore
