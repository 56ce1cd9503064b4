package main

import (
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

func TestResubmitPlan(t *testing.T) {
	enq := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	c := config{LockDuration: time.Minute, MessageTTL: 14 * 24 * time.Hour, DuplicateWindow: 10 * time.Minute, ResubmissionHorizon: 7 * 24 * time.Hour}
	horizonEnd := enq.Add(14*24*time.Hour + 2*time.Minute + 7*24*time.Hour) // T + 2D + H
	msg := func(props map[string]any) *azservicebus.ReceivedMessage {
		return &azservicebus.ReceivedMessage{MessageID: "o-1", EnqueuedTime: &enq, ApplicationProperties: props}
	}
	reason := "OrderIdReused"
	reused := msg(nil)
	reused.DeadLetterReason = &reason
	inbox := c
	inbox.InboxConsumer, inbox.InboxTTL = "loyalty", 20*24*time.Hour // shorter than the horizon: it decides
	forced := c
	forced.Force, forced.ForceWindow = true, true
	tests := []struct {
		name    string
		c       config
		m       *azservicebus.ReceivedMessage
		now     time.Time
		refused []string
		warn    []string
	}{
		{"inside the window", c, msg(nil), enq.Add(10*time.Minute - time.Second), []string{"inside the duplicate-detection window 10m", "(wait, or -force-window)"}, nil},
		{"at the window's end", c, msg(nil), enq.Add(10 * time.Minute), nil, nil},
		{"at the horizon", c, msg(nil), horizonEnd, nil, nil},
		{"past the horizon", c, msg(nil), horizonEnd.Add(time.Second), []string{"past the resubmission horizon", "message TTL 14d + 2 × lock duration 1m + resubmission horizon 7d"}, nil},
		{"horizon from the first copy's enqueue time", c, msg(map[string]any{PropOriginalEnqueuedTime: enq.Add(-10 * 24 * time.Hour).Format(time.RFC3339Nano)}),
			horizonEnd.Add(-9 * 24 * time.Hour), []string{"past the resubmission horizon"}, nil},
		{"inbox markers expire first", inbox, msg(nil), enq.Add(6*24*time.Hour + time.Second), []string{"inbox marker TTL 20d - message TTL 14d"}, nil},
		{"unlimited TTL: no horizon", config{LockDuration: time.Minute, DuplicateWindow: time.Minute}, msg(nil), enq.Add(1000 * 24 * time.Hour), nil, nil},
		{"forced", forced, msg(nil), enq, nil, []string{"-force-window: sending anyway", "the message is LOST if the broker drops it"}},
		{"forced past the horizon", forced, msg(nil), horizonEnd.Add(time.Hour), nil, []string{"-force: sending anyway"}},
		{"an id reused for other content", c, reused, enq.Add(time.Hour), nil, []string{"dead-lettered as OrderIdReused", "dead-letters the resubmission again", "orderctl dlq show o-1", "under a new order id"}},
	}
	for _, tt := range tests {
		p := tt.c.resubmitPlan(tt.m, tt.now)
		check := func(what string, got, want []string) {
			if len(want) == 0 && len(got) > 0 {
				t.Errorf("%s: %s = %q, want none", tt.name, what, got)
			}
			for _, w := range want {
				if !strings.Contains(strings.Join(got, "|"), w) {
					t.Errorf("%s: %s = %q, want %q", tt.name, what, got, w)
				}
			}
		}
		check("refused", p.refused, tt.refused)
		check("warn", p.warn, tt.warn)
	}
}

// A resubmission copies the message without the dead-letter properties,
// without sharing the received message's map, and counts resubmissions.
func TestResubmission(t *testing.T) {
	enq := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	subject, reason := "OrderPlaced", "x"
	props := map[string]any{"DeadLetterReason": reason, "DeadLetterErrorDescription": "y", "tenant": "t1", PropResubmissionCount: int64(2),
		PropOriginalEnqueuedTime: "2026-10-01T00:00:00Z"}
	m := &azservicebus.ReceivedMessage{MessageID: "o-1", Body: []byte("{}"), Subject: &subject, EnqueuedTime: &enq, ApplicationProperties: props, DeadLetterReason: &reason}
	out := resubmission(m)
	if *out.MessageID != "o-1" || string(out.Body) != "{}" || *out.Subject != subject {
		t.Errorf("resubmission = %+v", out)
	}
	want := map[string]any{"tenant": "t1", PropResubmissionCount: int64(3), PropOriginalEnqueuedTime: "2026-10-01T00:00:00Z"}
	if len(out.ApplicationProperties) != len(want) {
		t.Errorf("properties = %v, want %v", out.ApplicationProperties, want)
	}
	for k, v := range want {
		if out.ApplicationProperties[k] != v {
			t.Errorf("property %s = %v, want %v", k, out.ApplicationProperties[k], v)
		}
	}
	if _, ok := props["DeadLetterReason"]; !ok {
		t.Error("the received message's properties were modified")
	}
	if got := resubmission(&azservicebus.ReceivedMessage{MessageID: "o-2", EnqueuedTime: &enq}).ApplicationProperties; got[PropOriginalEnqueuedTime] != "2026-11-01T00:00:00Z" || got[PropResubmissionCount] != int64(1) {
		t.Errorf("first resubmission's properties = %v", got)
	}
}
