package capacity

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// WriteText writes the plan as the tables orderctl plan prints.
func (p Plan) WriteText(w io.Writer) error {
	in := p.Inputs
	var b strings.Builder
	onOff := map[bool]string{true: "on", false: "off"}
	subs := "none"
	if len(in.Subscribers) > 0 {
		subs = strings.Join(in.Subscribers, ", ")
	}
	fmt.Fprintf(&b, "Plan for %s order messages/s: %s copies, %s redeliveries, %s status changes per order; payments %s; relay %s; subscribers %s\n",
		num(in.Rate), pct(in.Duplicates), pct(in.Redeliveries), num(in.StatusChanges), onOff[in.Payments], onOff[in.Relay], subs)
	cosmos := "Cosmos DB serverless"
	if in.Cosmos == Provisioned {
		cosmos = fmt.Sprintf("Cosmos DB %s RU/s provisioned (autoscale maximum), shared by the database", num(in.CosmosRUs))
	}
	bus := "Service Bus Standard"
	if in.ServiceBus == Premium {
		bus = fmt.Sprintf("Service Bus Premium, %d messaging unit(s)", in.MessagingUnit)
	}
	fmt.Fprintf(&b, "Deployment: %s; %s; worker concurrency %d on at most %d replicas; subscribers at most %d replicas each\n",
		cosmos, bus, in.Concurrency, in.Workers, in.SubscriberReplicas)
	mode := "create first"
	if p.ReadFirst {
		mode = "read first"
	}
	fmt.Fprintf(&b, "Copies among first deliveries: %s, so the processors %s (adaptive: read first above 56 %%)\n", pct(p.CopyShare), mode)
	fmt.Fprintf(&b, "Latencies (assumed unless measured and given): Cosmos DB round trip %v, settlement %v, payment capture %v\n\n",
		in.CosmosLatency, in.SettleLatency, in.PaymentLatency)

	b.WriteString("Cosmos DB requests per message\n")
	t := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(t, "service\tcontainer\tpath\tper s\tround trips\tRU/message\tRU/s\trequests")
	for _, f := range p.Flows {
		var reqs []string
		for _, r := range f.Path.Requests {
			reqs = append(reqs, fmt.Sprintf("%s (%d doc%s) %s RU", r.Kind, r.Docs, plural(r.Docs), num(r.RU())))
		}
		if len(reqs) == 0 {
			reqs = []string{"none"}
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", f.Service, f.Container, f.Path.ID, num(f.PerSecond), f.RoundTrips, num(f.RU), num(f.RUs), strings.Join(reqs, " + "))
	}
	t.Flush()
	var cs []string
	for _, c := range p.Containers {
		cs = append(cs, fmt.Sprintf("%s %s", c.Name, num(c.RUs)))
	}
	fmt.Fprintf(&b, "RU/s by container: %s\n\n", strings.Join(cs, ", "))

	b.WriteString("Service Bus operations\n")
	t = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(t, "operation\tper s\tStandard credits/s\tKB/s")
	for _, o := range p.Bus {
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\n", o.Op, num(o.PerSecond), num(o.Credits), num(o.KBps))
	}
	fmt.Fprintf(t, "total\t\t%s\t%s MB/s\n", num(p.Credits), num(p.MBps))
	t.Flush()
	b.WriteString("\n")

	fmt.Fprintf(&b, "Ceilings: the first reached is %s, at %s order messages/s\n", p.First.Name, num(p.First.MaxRate))
	t = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(t, "limit\tcapacity\tused at this rate\tused\treached at (messages/s)\tsource")
	for _, l := range p.Limits {
		src := l.Source
		if l.Estimate {
			src = "estimate; " + src
			if l.Source == "" {
				src = "estimate from the latencies"
			}
		}
		fmt.Fprintf(t, "%s\t%s %s\t%s\t%s\t%s\t%s\n", l.Name, num(l.Capacity), l.Unit, num(l.Use), pct(l.Use/l.Capacity), num(l.MaxRate), src)
	}
	t.Flush()
	b.WriteString("\n")

	n := p.Needs
	fmt.Fprintf(&b, "Needs at %s order messages/s\n", num(in.Rate))
	fmt.Fprintf(&b, "  worker: %d replica(s) at concurrency %d (%s messages/s each: concurrency %d ÷ %v per message)", n.WorkerReplicas, in.Concurrency, num(p.PerWorker), in.Concurrency, p.WorkerLatency.Round(100_000))
	if n.WorkerReplicas > in.Workers {
		fmt.Fprintf(&b, "; more than the %d allowed: raise workerMaxReplicas to %d, or WORKER_CONCURRENCY to %d", in.Workers, n.WorkerReplicas, n.WorkerConcurrency)
	}
	b.WriteString("\n")
	if n.SubscriberReplicas > 0 {
		fmt.Fprintf(&b, "  each subscriber: %d replica(s) at concurrency %d", n.SubscriberReplicas, in.Concurrency)
		if n.SubscriberReplicas > in.SubscriberReplicas {
			fmt.Fprintf(&b, "; more than the %d allowed: raise subscriberMaxReplicas", in.SubscriberReplicas)
		}
		b.WriteString("\n")
	}
	switch {
	case n.ServiceBus == Standard:
		fmt.Fprintf(&b, "  Service Bus: Standard suffices (%s of its %s credits/s)\n", num(p.Credits), num(StandardCredits))
	case n.MessagingUnits > 0:
		fmt.Fprintf(&b, "  Service Bus: Premium, %d messaging unit(s) (%s credits/s exceed Standard's %s; %s MB/s at about %s MB/s per unit; scale up above %s CPU)\n",
			n.MessagingUnits, num(p.Credits), num(StandardCredits), num(p.MBps), num(PremiumMBPerMU), pct(PremiumScaleUpCPU))
	default:
		fmt.Fprintf(&b, "  Service Bus: Premium beyond 16 messaging units (%s MB/s): split the traffic over namespaces\n", num(p.MBps))
	}
	if n.Cosmos == Serverless {
		fmt.Fprintf(&b, "  Cosmos DB: serverless suffices (every container under %s RU/s)\n", num(ServerlessRUs))
	} else {
		fmt.Fprintf(&b, "  Cosmos DB: provisioned, %s RU/s for the database (autoscale maximum; its partitions hold %s RU/s each)\n", num(n.CosmosRUs), num(PartitionRUs))
	}
	b.WriteString("\nFigures (published by Microsoft unless marked estimate)\n")
	t = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, f := range p.Figures {
		v := num(f.Value) + " " + f.Unit
		if f.Value == 0 && strings.Contains(f.Unit, ":") { // a rule, not a number
			v = f.Unit
		}
		kind := "published"
		if f.Estimate {
			kind = "estimate: " + f.Basis
		} else if f.Basis != "" {
			kind = "published: " + f.Basis
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\n", f.Name, v, f.Source, kind)
	}
	t.Flush()
	_, err := io.WriteString(w, b.String())
	return err
}

// num formats a figure for reading: whole numbers from 100 up, one or two
// decimals below.
func num(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "unbounded"
	case math.Abs(v) >= 100 || v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func pct(v float64) string { return fmt.Sprintf("%.0f %%", 100*v) }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
