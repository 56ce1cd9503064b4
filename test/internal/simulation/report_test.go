package simulation_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/test/internal/simulation"
)

// The report's figures are one table: a long label (here a consumer's name
// and a dead-letter reason of its own) widens the label column instead of
// pushing its value out of line, every value ends in the same column, and
// rows say what they count.
func TestReportColumns(t *testing.T) {
	long := "a-consumer-with-a-rather-long-subscription-name"
	rep := &simulation.Report{
		Config:          simulation.Config{Seed: 9, MarkerTTL: 1},
		Orders:          3,
		Accounting:      simulation.Accounting{Sent: 3, Enqueued: 3, Completed: 2, DeadLettered: map[string]int{"SomeReasonOfAnotherConsumerEntirely": 1}},
		Outcomes:        simulation.Outcomes{Created: 2},
		DuplicateCauses: simulation.DuplicateCauses{Unexplained: 1234567},
		Inbox:           []simulation.InboxReport{{Consumer: long, Entries: 2, Markers: 2}},
	}
	var b strings.Builder
	if _, err := rep.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	// A row: two spaces, the label, at least one space, the value, then
	// two spaces and a note or the end of the line.
	rowRE := regexp.MustCompile(`^  (\S.*?\S) +(\d[\d /+]*\d|\d)(  .*)?$`)
	valueEnd := -1
	rows := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "Invariants") {
			break // below: text, not the table
		}
		m := rowRE.FindStringSubmatchIndex(l)
		if m == nil {
			continue
		}
		rows++
		if valueEnd == -1 {
			valueEnd = m[5]
		} else if m[5] != valueEnd {
			t.Errorf("value of %q ends at column %d, want %d like the others:\n%s", l, m[5], valueEnd, out)
		}
	}
	if rows < 20 {
		t.Fatalf("%d rows found, want the whole table:\n%s", rows, out)
	}
	for _, want := range []string{
		"  " + long + ": created",
		"    dead-lettered, SomeReasonOfAnotherConsumerEntirely",
		"effects written / live markers",
		`an order.LoyaltyEntry (type "loyalty", consumer "` + long + `") per order`,
		"    unexplained",
		"no cause above found",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "loyalty entries / live markers") {
		t.Errorf("the inbox block calls every consumer's writes loyalty entries:\n%s", out)
	}
}
