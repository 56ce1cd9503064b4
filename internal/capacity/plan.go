package capacity

import (
	"encoding/json"
	"math"
	"time"
)

// The adaptive read-first thresholds of order.WithAdaptiveReadFirst: a
// processor reads before it creates while its estimate of the copies among
// first deliveries is above 9/16 (and creates first again below 7/16).
const readFirstAbove = 9.0 / 16

// Flow is one path taken at a rate: who takes it, in which container, how
// often, and what it costs.
type Flow struct {
	Service    string  `json:"service"`   // worker, relay or a subscriber's name
	Container  string  `json:"container"` // the Cosmos DB container the requests go to
	Path       Path    `json:"path"`
	PerSecond  float64 `json:"perSecond"`
	RoundTrips int     `json:"roundTrips"`
	RU         float64 `json:"ru"`  // per message
	RUs        float64 `json:"rus"` // RU/s at PerSecond
}

// Container is the request units per second one Cosmos DB container
// needs at the planned rate.
type Container struct {
	Name string  `json:"name"`
	RUs  float64 `json:"rus"`
}

// BusOp is one kind of Service Bus operation at the planned rate: how many
// messages per second, the throttling credits they cost on Standard and the
// bytes they move (Premium's measure).
type BusOp struct {
	Op        string  `json:"op"`
	PerSecond float64 `json:"perSecond"`
	Credits   float64 `json:"credits"` // per second
	KBps      float64 `json:"kbps"`    // ingress or egress
}

// Limit is one ceiling: its capacity, what the planned rate uses of it, and
// the rate of order messages at which it is reached (the use scales with
// the rate).
type Limit struct {
	Name     string  `json:"name"`
	Capacity float64 `json:"capacity"`
	Unit     string  `json:"unit"`
	Use      float64 `json:"use"`
	MaxRate  float64 `json:"maxRate"` // order messages per second; +Inf when the rate does not use it
	Source   string  `json:"source"`
	Estimate bool    `json:"estimate"`
}

// Needs is what the rate needs: replicas at the given concurrency (or the
// concurrency at the most replicas), the Service Bus tier and the Cosmos DB
// throughput.
type Needs struct {
	WorkerReplicas     int     `json:"workerReplicas"`
	WorkerConcurrency  int     `json:"workerConcurrency"` // at Inputs.Workers replicas, when WorkerReplicas exceeds them; else Inputs.Concurrency
	SubscriberReplicas int     `json:"subscriberReplicas"`
	ServiceBus         string  `json:"serviceBus"`
	MessagingUnits     int     `json:"messagingUnits"` // Premium; 0 when more than 16 would be needed
	Cosmos             string  `json:"cosmos"`
	CosmosRUs          float64 `json:"cosmosRUs"` // Provisioned: the database's RU/s (autoscale maximum)
}

// Plan is the computed capacity plan.
type Plan struct {
	Inputs        Inputs        `json:"inputs"`
	CopyShare     float64       `json:"copyShare"` // copies among first deliveries
	ReadFirst     bool          `json:"readFirst"` // the processors read before they create
	Flows         []Flow        `json:"flows"`
	Containers    []Container   `json:"containers"`
	Bus           []BusOp       `json:"serviceBus"`
	Credits       float64       `json:"credits"` // per second, all of the namespace's operations
	MBps          float64       `json:"mbps"`    // ingress plus egress
	WorkerLatency time.Duration `json:"workerLatencyNs"`
	PerWorker     float64       `json:"perWorker"` // messages per second per worker replica
	Limits        []Limit       `json:"limits"`
	First         Limit         `json:"first"`
	Needs         Needs         `json:"needs"`
	Figures       []Figure      `json:"figures"`
}

// Compute returns the plan for in, which must be valid (Validate).
func Compute(in Inputs) Plan {
	p := Plan{Inputs: in, Figures: Figures()}
	r := in.Rate
	newShare := 1 - in.Duplicates - in.Redeliveries
	if first := in.Duplicates + newShare; first > 0 {
		p.CopyShare = in.Duplicates / first
	}
	p.ReadFirst = p.CopyShare > readFirstAbove
	newPath, copyPath := OrderNew, OrderCopy
	switch {
	case p.ReadFirst && in.Payments:
		newPath, copyPath = PaymentNewReadFirst, OrderCopyReadFirst
	case p.ReadFirst:
		newPath, copyPath = OrderNewReadFirst, OrderCopyReadFirst
	case in.Payments:
		newPath, copyPath = PaymentNew, PaymentCopy
	}
	newOrders := r * newShare
	statuses := newOrders * in.StatusChanges
	add := func(service, container string, id PathID, perSecond float64) {
		if perSecond <= 0 {
			return
		}
		path, _ := PathOf(id)
		p.Flows = append(p.Flows, Flow{Service: service, Container: container, Path: path, PerSecond: perSecond,
			RoundTrips: path.RoundTrips(), RU: path.RU(), RUs: perSecond * path.RU()})
	}
	add("worker", "orders", newPath, newOrders)
	add("worker", "orders", copyPath, r*in.Duplicates)
	add("worker", "orders", OrderRedelivery, r*in.Redeliveries)
	add("worker", "orders", StatusApplied, statuses)
	events := 0.0
	if in.Relay {
		events = newOrders
	}
	for _, s := range in.Subscribers {
		add(s, s, InboxNew, events)
	}

	// The worker: Little's law on its average message.
	workerMsgs := r + statuses
	var trips float64
	for _, f := range p.Flows {
		if f.Service == "worker" {
			trips += f.PerSecond * float64(f.RoundTrips)
		}
	}
	lat := trips/workerMsgs*in.CosmosLatency.Seconds() + in.SettleLatency.Seconds()
	if in.Payments {
		lat += newOrders / workerMsgs * in.PaymentLatency.Seconds()
	}
	p.WorkerLatency = time.Duration(lat * float64(time.Second))
	p.PerWorker = float64(in.Concurrency) / lat
	subLat := in.CosmosLatency.Seconds() + in.SettleLatency.Seconds() // InboxNew: one round trip
	perSubscriber := float64(in.Concurrency) / subLat

	// The relay: under load it reads a range once per cycle (a feed read
	// and a topic send, after a wait of 1/32 of the poll interval), each
	// read returning what the cycle let accumulate; a quieter feed is
	// read about once per change, an idle one once per poll interval (an
	// estimate: the backoff's exact schedule is relay's). It checkpoints
	// a range at most once per checkpoint interval, and at most once per
	// event; a backlog is read in full pages, one after the other, with
	// no wait.
	partitions := 1.0
	if in.Cosmos == Provisioned {
		partitions = math.Max(1, math.Ceil(in.CosmosRUs/PartitionRUs))
	}
	relayCap := math.Inf(1)
	var feedRUs, leaseRUs, relayDocs float64
	if in.Relay {
		docsPerOrder := 2 + in.StatusChanges // the order, its event, each status patch
		if in.Payments {
			docsPerOrder += 2 // the claim, its completed mark
		}
		relayDocs = newOrders * docsPerOrder
		cycle := in.CosmosLatency.Seconds() + in.SettleLatency.Seconds()
		wait := in.RelayPoll.Seconds() / 32
		polls := math.Min(partitions/(wait+cycle), relayDocs+partitions/in.RelayPoll.Seconds()) // + the idle reads
		checkpoints := math.Min(partitions/in.RelayCheckpoint.Seconds(), events)
		feedRUs = math.Max(polls, relayDocs) * PointReadRU
		leaseRUs = (checkpoints + partitions*3/in.RelayLease.Seconds()) * ReplaceRU
		relayCap = partitions * float64(in.RelayPageSize) / cycle
		p.Flows = append(p.Flows,
			Flow{Service: "relay", Container: "orders", Path: Path{ID: RelayFeed, Requests: []Request{{FeedRead, int(math.Max(1, math.Round(relayDocs/polls))), "read a page of the change feed"}}},
				PerSecond: polls, RoundTrips: 1, RU: feedRUs / polls, RUs: feedRUs},
			Flow{Service: "relay", Container: "leases", Path: Path{ID: RelayLease, Requests: []Request{{Replace, 1, "checkpoint or renew a lease"}}},
				PerSecond: leaseRUs / ReplaceRU, RoundTrips: 1, RU: ReplaceRU, RUs: leaseRUs})
	}
	byName := map[string]int{}
	for _, f := range p.Flows {
		i, ok := byName[f.Container]
		if !ok {
			i = len(p.Containers)
			byName[f.Container] = i
			p.Containers = append(p.Containers, Container{Name: f.Container})
		}
		p.Containers[i].RUs += f.RUs
	}

	// Service Bus.
	subs := float64(len(in.Subscribers))
	bus := func(op string, perSecond, credits float64, kb bool) {
		if perSecond <= 0 {
			return
		}
		o := BusOp{Op: op, PerSecond: perSecond, Credits: perSecond * credits}
		if kb {
			o.KBps = perSecond * in.MessageKB
		}
		p.Bus = append(p.Bus, o)
		p.Credits += o.Credits
		p.MBps += o.KBps / 1024
	}
	bus("send to the queue (producer)", workerMsgs, CreditPerMessage, true)
	bus("receive from the queue (worker)", workerMsgs, CreditPerMessage, true)
	bus("complete (worker)", workerMsgs, 0, false)
	if in.Relay {
		bus("send to the topic (relay)", events, CreditPerMessage, true)
		bus("filter evaluation, one per subscription", events*subs, CreditPerMessage, false)
		bus("receive from the subscriptions (subscribers)", events*subs, CreditPerMessage, true)
		bus("complete (subscribers)", events*subs, 0, false)
	}

	// The ceilings.
	limit := func(name string, capacity, use float64, unit, source string, estimate bool) {
		l := Limit{Name: name, Capacity: capacity, Use: use, Unit: unit, Source: source, Estimate: estimate, MaxRate: math.Inf(1)}
		if use > 0 {
			l.MaxRate = r * capacity / use
		}
		p.Limits = append(p.Limits, l)
	}
	var total float64
	for _, c := range p.Containers {
		total += c.RUs
		if in.Cosmos == Serverless {
			limit("Cosmos DB serverless container "+c.Name, ServerlessRUs, c.RUs, "RU/s", SourceServerless, false)
		}
	}
	if in.Cosmos == Provisioned {
		limit("Cosmos DB database throughput, shared by its containers", in.CosmosRUs, total, "RU/s", SourceRequestUnits, false)
	}
	orders := 0.0
	if i, ok := byName["orders"]; ok {
		orders = p.Containers[i].RUs
	}
	if in.Cosmos == Provisioned {
		// Serverless's per-container figure is its one partition's; with
		// provisioned throughput each order is its own partition key, so
		// the load spreads evenly over the physical partitions.
		limit("Cosmos DB physical partition of orders (keys spread evenly)", PartitionRUs, orders/partitions, "RU/s", SourceCosmosLimits, false)
	}
	if in.ServiceBus == Standard {
		limit("Service Bus Standard namespace", StandardCredits, p.Credits, "credits/s", SourceSBThrottling, false)
	} else {
		limit("Service Bus Premium namespace", float64(in.MessagingUnit)*PremiumMBPerMU, p.MBps, "MB/s", SourceSBPerformance, false)
	}
	limit("workers: replicas × concurrency ÷ latency", float64(in.Workers)*p.PerWorker, workerMsgs, "messages/s", "", true)
	for _, s := range in.Subscribers {
		limit("subscriber "+s+": replicas × concurrency ÷ latency", float64(in.SubscriberReplicas)*perSubscriber, events, "events/s", "", true)
	}
	if in.Relay {
		limit("relay: page size ÷ cycle, per feed range", relayCap, relayDocs, "changes/s", SourceChangeFeed, true)
	}
	p.First = p.Limits[0]
	for _, l := range p.Limits[1:] {
		if l.MaxRate < p.First.MaxRate {
			p.First = l
		}
	}

	// What the rate needs.
	n := &p.Needs
	n.WorkerReplicas = ceil(workerMsgs / p.PerWorker)
	n.WorkerConcurrency = in.Concurrency
	if n.WorkerReplicas > in.Workers {
		n.WorkerConcurrency = ceil(workerMsgs * lat / float64(in.Workers))
	}
	if events > 0 && len(in.Subscribers) > 0 {
		n.SubscriberReplicas = ceil(events / perSubscriber)
	}
	n.ServiceBus = Standard
	if p.Credits > StandardCredits {
		n.ServiceBus = Premium
		for _, mu := range []int{1, 2, 4, 8, 16} {
			if float64(mu)*PremiumMBPerMU >= p.MBps {
				n.MessagingUnits = mu
				break
			}
		}
	}
	n.Cosmos = Serverless
	for _, c := range p.Containers {
		if c.RUs > ServerlessRUs {
			n.Cosmos = Provisioned
		}
	}
	if n.Cosmos == Provisioned || in.Cosmos == Provisioned {
		n.Cosmos = Provisioned
		n.CosmosRUs = math.Max(ProvisionedIncrement, math.Ceil(total/ProvisionedIncrement)*ProvisionedIncrement)
	}
	return p
}

// MarshalJSON writes a MaxRate the rate does not approach (+Inf) as null.
func (l Limit) MarshalJSON() ([]byte, error) {
	type plain Limit
	v := struct {
		plain
		MaxRate *float64 `json:"maxRate"`
	}{plain: plain(l)}
	if !math.IsInf(l.MaxRate, 0) {
		v.MaxRate = &l.MaxRate
	}
	return json.Marshal(v)
}

// ceil rounds up, forgiving the last bits of floating-point error (3.0000000004
// replicas are 3).
func ceil(v float64) int { return int(math.Ceil(v - 1e-9)) }
