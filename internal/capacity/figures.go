package capacity

// The sources of the published figures, Microsoft's documentation pages.
const (
	SourceRequestUnits      = "https://learn.microsoft.com/en-us/azure/cosmos-db/request-units"
	SourceOptimizeCost      = "https://learn.microsoft.com/en-us/azure/cosmos-db/optimize-cost-reads-writes"
	SourcePatchFAQ          = "https://learn.microsoft.com/en-us/azure/cosmos-db/partial-document-update-faq"
	SourceTransactionBatch  = "https://learn.microsoft.com/en-us/azure/cosmos-db/nosql/transactional-batch"
	SourceChangeFeed        = "https://learn.microsoft.com/en-us/azure/cosmos-db/nosql/change-feed-processor"
	SourceCosmosLimits      = "https://learn.microsoft.com/en-us/azure/cosmos-db/concepts-limits"
	SourceServerless        = "https://learn.microsoft.com/en-us/azure/cosmos-db/serverless-performance"
	SourceSBThrottling      = "https://learn.microsoft.com/en-us/azure/service-bus-messaging/service-bus-throttling"
	SourceSBPerformance     = "https://learn.microsoft.com/en-us/azure/service-bus-messaging/service-bus-performance-improvements"
	SourceSBPremium         = "https://learn.microsoft.com/en-us/azure/service-bus-messaging/service-bus-premium-messaging"
	SourceThisProjectMetric = "docs/operating.md#telemetry-traces-and-metrics"
)

// The published figures the model uses: request units of 1 KB items (the
// containers index no path, see infra/bicep/modules/cosmos.bicep, which is
// what "without indexing" means), Cosmos DB's throughput ceilings and
// Service Bus's throttling model.
const (
	PointReadRU          = 1.0      // a point read of a 1 KB item (SourceRequestUnits, SourceOptimizeCost)
	InsertRU             = 5.5      // inserting a 1 KB item without indexing, "around ~5.5 RUs" (SourceOptimizeCost)
	ReplaceRU            = 2 * 5.5  // "Replacing an item costs two times the charge required to insert the same item" (SourceOptimizeCost)
	PartitionRUs         = 10_000.0 // maximum RU/s per physical (and logical) partition (SourceCosmosLimits)
	ServerlessRUs        = 5_000.0  // RU/s of a serverless container up to 50 GB, one physical partition (SourceServerless)
	StandardCredits      = 1_000.0  // throttling credits per second per Standard namespace (SourceSBThrottling)
	CreditPerMessage     = 1.0      // Send, Receive, Peek: 1 credit per message; each filter evaluation of a topic send 1 (SourceSBThrottling)
	PremiumMBPerMU       = 4.0      // "approximately 4 MB/second per Messaging Unit (MU) of ingress and egress" (SourceSBPerformance)
	PremiumScaleUpCPU    = 0.70     // scale up a Premium namespace above 70 % CPU (SourceSBPremium)
	ProvisionedIncrement = 100.0    // provisioned RU/s are set in steps of 100 (SourceRequestUnits)
	StandardMaxMessageKB = 256.0    // Standard's messages are up to 256 KB, Premium's 100 MB (SourceSBPremium)
)

// Figure is one number the plan rests on, with where it comes from. An
// estimate is a number Microsoft does not publish; Basis says what it is
// derived from.
type Figure struct {
	Name     string  `json:"name"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Source   string  `json:"source"`
	Estimate bool    `json:"estimate"`
	Basis    string  `json:"basis,omitempty"`
}

// Figures lists every figure of the model, published ones first.
func Figures() []Figure {
	return []Figure{
		{Name: "point read, 1 KB item", Value: PointReadRU, Unit: "RU", Source: SourceOptimizeCost},
		{Name: "insert (create), 1 KB item, no index", Value: InsertRU, Unit: "RU", Source: SourceOptimizeCost},
		{Name: "replace, 1 KB item", Value: ReplaceRU, Unit: "RU", Source: SourceOptimizeCost, Basis: "two times the insert"},
		{Name: "RU/s per physical partition", Value: PartitionRUs, Unit: "RU/s", Source: SourceCosmosLimits},
		{Name: "serverless container (≤ 50 GB, one partition)", Value: ServerlessRUs, Unit: "RU/s", Source: SourceServerless},
		{Name: "Standard namespace throttling credits", Value: StandardCredits, Unit: "credits/s", Source: SourceSBThrottling},
		{Name: "Send, Receive, Peek; each filter evaluation of a topic send", Value: CreditPerMessage, Unit: "credit per message", Source: SourceSBThrottling},
		{Name: "Standard message size, at most", Value: StandardMaxMessageKB, Unit: "KB", Source: SourceSBPremium},
		{Name: "Premium messaging unit, ingress and egress", Value: PremiumMBPerMU, Unit: "MB/s", Source: SourceSBPerformance, Basis: "Microsoft's benchmark; read here as ingress plus egress together"},
		{Name: "Premium: scale up above this CPU", Value: PremiumScaleUpCPU * 100, Unit: "%", Source: SourceSBPremium},
		{Name: "point read that finds nothing (404)", Value: PointReadRU, Unit: "RU", Source: SourceOptimizeCost, Estimate: true,
			Basis: "charged as the point read; Microsoft publishes no figure for a miss"},
		{Name: "patch (partial document update), 1 KB item", Value: ReplaceRU, Unit: "RU", Source: SourcePatchFAQ, Estimate: true,
			Basis: `charged as a replace: the FAQ says patch is billed like other operations and "users shouldn't expect a significant reduction in RU"`},
		{Name: "transactional batch", Value: 0, Unit: "RU: the sum of its operations", Source: SourceTransactionBatch, Estimate: true,
			Basis: "Microsoft reports one request charge per batch and publishes no formula; the sum of its operations' figures"},
		{Name: "rejected write (409 conflict, 412 precondition, 404 patch)", Value: 0, Unit: "RU: the write's own figure", Source: SourceOptimizeCost, Estimate: true,
			Basis: "Microsoft publishes no charge for a rejected write; the plan charges the write it attempted (an upper bound)"},
		{Name: "change-feed read, per 1 KB item returned (at least 1 per request)", Value: PointReadRU, Unit: "RU", Source: SourceChangeFeed, Estimate: true,
			Basis: "Microsoft says only that feed reads and lease writes consume RUs; charged as a point read per item"},
		{Name: "settlement (complete, abandon, dead-letter)", Value: 0, Unit: "credits", Source: SourceSBThrottling, Estimate: true,
			Basis: "not in Microsoft's list of operations that cost credits; counted 0"},
	}
}
