package sbbroker

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// response is the outcome of a $cbs or $management request.
type response struct {
	status      int32
	description string
	body        any
}

func statusf(status int32, format string, args ...any) response {
	return response{status: status, description: fmt.Sprintf(format, args...)}
}

// putToken handles a $cbs put-token request: it verifies the SAS token's
// signature, expiry and audience, and that the audience's entity exists.
func (b *Broker) putToken(req *amqp.Message) response {
	op, _ := req.ApplicationProperties["operation"].(string)
	if op != "put-token" {
		return statusf(400, "unsupported $cbs operation %q", op)
	}
	if typ, _ := req.ApplicationProperties["type"].(string); typ != "servicebus.windows.net:sastoken" {
		return statusf(401, "token type %q is not supported: use a shared access key", typ)
	}
	audience, _ := req.ApplicationProperties["name"].(string)
	token, _ := req.Value.(string)
	if err := b.verifySAS(token, audience, time.Now()); err != nil {
		return statusf(401, "%v", err)
	}
	entity, err := audienceEntity(audience)
	if err != nil {
		return statusf(400, "%v", err)
	}
	if entity != "" && !b.exists(entity) {
		return statusf(404, "the messaging entity %q could not be found", entity)
	}
	return response{status: 202, description: "Accepted"}
}

// exists reports whether an entity path names a queue, a topic, a
// subscription or a dead-letter queue of the namespace.
func (b *Broker) exists(entity string) bool {
	if _, ok := b.ns.Topic(entity); ok {
		return true
	}
	_, ok := b.ns.Queue(entity)
	return ok
}

// errBadToken is wrapped by every SAS verification failure.
var errBadToken = errors.New("invalid shared access signature")

// verifySAS checks a token of the form
// "SharedAccessSignature sr=<aud>&sig=<sig>&se=<expiry>&skn=<keyname>":
// the key name, the HMAC-SHA256 signature of sr+"\n"+se, the expiry, and
// that sr is the requested audience.
func (b *Broker) verifySAS(token, audience string, now time.Time) error {
	rest, ok := strings.CutPrefix(token, "SharedAccessSignature ")
	if !ok {
		return fmt.Errorf("%w: not a SharedAccessSignature", errBadToken)
	}
	fields := make(map[string]string)
	for _, kv := range strings.Split(rest, "&") {
		k, v, _ := strings.Cut(kv, "=")
		fields[k] = v
	}
	sr, se := fields["sr"], fields["se"]
	if fields["skn"] != b.opts.KeyName {
		return fmt.Errorf("%w: unknown key name %q", errBadToken, fields["skn"])
	}
	sig, err := url.QueryUnescape(fields["sig"])
	if err != nil {
		return fmt.Errorf("%w: %v", errBadToken, err)
	}
	got, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return fmt.Errorf("%w: %v", errBadToken, err)
	}
	mac := hmac.New(sha256.New, []byte(b.opts.Key))
	mac.Write([]byte(sr + "\n" + se))
	if !hmac.Equal(got, mac.Sum(nil)) {
		return fmt.Errorf("%w: signature mismatch", errBadToken)
	}
	expiry, err := strconv.ParseInt(se, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: expiry %q", errBadToken, se)
	}
	if expiry != 0 && now.Unix() >= expiry {
		return fmt.Errorf("%w: expired at %s", errBadToken, time.Unix(expiry, 0).UTC())
	}
	if sr != strings.ToLower(url.QueryEscape(audience)) {
		return fmt.Errorf("%w: signed for %q, presented for %q", errBadToken, sr, audience)
	}
	return nil
}

// audienceEntity returns the entity path of a token audience such as
// amqp://127.0.0.1:5672/orders/$management: "orders". It is "" for the
// namespace itself.
func audienceEntity(audience string) (string, error) {
	u, err := url.Parse(audience)
	if err != nil {
		return "", fmt.Errorf("bad audience %q: %w", audience, err)
	}
	entity := strings.Trim(u.Path, "/")
	entity = strings.TrimSuffix(entity, "/$management")
	return entity, nil
}

// Management operations the broker implements.
const (
	opRenewLock         = "com.microsoft:renew-lock"
	opUpdateDisposition = "com.microsoft:update-disposition"
	opPeekMessage       = "com.microsoft:peek-message"
)

// manage handles a $management request for queue q.
func (b *Broker) manage(q *sbqueue.Queue, req *amqp.Message) response {
	op, _ := req.ApplicationProperties["operation"].(string)
	body, _ := req.Value.(map[string]any)
	switch op {
	case opRenewLock:
		tokens, ok := body["lock-tokens"].([]amqp.UUID)
		if !ok {
			return statusf(400, "renew-lock needs lock-tokens, an array of uuid")
		}
		expirations := make([]time.Time, 0, len(tokens))
		for _, t := range tokens {
			until, err := q.RenewLock(t)
			if err != nil {
				return lockStatus(err)
			}
			expirations = append(expirations, until)
		}
		return response{status: 200, description: "OK", body: map[string]any{"expirations": expirations}}
	case opUpdateDisposition:
		return updateDisposition(q, body)
	case opPeekMessage:
		return peek(q, body)
	case opScheduleMessage:
		if q.DeadLetterQueue() == nil {
			return statusf(400, "operation %q is not allowed on dead-letter queue %q", op, q.Name())
		}
		return b.schedule(q, body)
	case opCancelScheduled:
		return cancelScheduled(q, body)
	}
	return statusf(501, "operation %q is not supported by the test broker", op)
}

// manageTopic handles a $management request on a topic, which the SDK's
// sender opens next to its send link. A topic holds no messages of its own,
// so the lock and peek operations are refused with 400 (the status Service
// Bus gives is not documented; the SDK reports any non-2xx status as an
// error); the sender's scheduling operations are not implemented (501).
func manageTopic(t *sbqueue.Topic, req *amqp.Message) response {
	op, _ := req.ApplicationProperties["operation"].(string)
	switch op {
	case opRenewLock, opUpdateDisposition, opPeekMessage:
		return statusf(400, "operation %q is not allowed on topic %q: use one of its subscriptions", op, t.Name())
	}
	return statusf(501, "operation %q is not supported by the test broker", op)
}

// lockStatus maps a settlement error to its management status: 410 Gone
// for a lost lock, which the SDK reports as CodeLockLost.
func lockStatus(err error) response {
	if errors.Is(err, sbqueue.ErrLockLost) {
		return statusf(410, "%v", err)
	}
	return statusf(400, "%v", err)
}

// updateDisposition settles messages by lock token: the SDK's fallback
// when the receive link that delivered them is gone.
func updateDisposition(q *sbqueue.Queue, body map[string]any) response {
	tokens, ok := body["lock-tokens"].([]amqp.UUID)
	if !ok {
		return statusf(400, "update-disposition needs lock-tokens, an array of uuid")
	}
	status, _ := body["disposition-status"].(string)
	props, _ := body["properties-to-modify"].(map[string]any)
	reason, _ := body["deadletter-reason"].(string)
	desc, _ := body["deadletter-description"].(string)
	for _, t := range tokens {
		var err error
		switch status {
		case "completed":
			err = q.Complete(t)
		case "abandoned":
			err = q.Abandon(t, props)
		case "suspended":
			err = q.DeadLetter(t, reason, desc, props)
		default:
			return statusf(501, "disposition-status %q is not supported by the test broker", status)
		}
		if err != nil {
			return lockStatus(err)
		}
	}
	return response{status: 200, description: "OK"}
}

// peek returns up to message-count messages with sequence numbers from
// from-sequence-number on, without locking them.
func peek(q *sbqueue.Queue, body map[string]any) response {
	from, _ := body["from-sequence-number"].(int64)
	count, _ := body["message-count"].(int32)
	if count <= 0 {
		return statusf(400, "message-count must be positive")
	}
	var out []any
	for _, m := range q.Peek(math.MaxInt32) {
		if m.SequenceNumber < from {
			continue
		}
		am := toAMQP(m)
		delete(am.Annotations, annotLockedUntil)
		b, err := am.MarshalBinary()
		if err != nil {
			return statusf(500, "%v", err)
		}
		out = append(out, map[string]any{"message": b})
		if len(out) == int(count) {
			break
		}
	}
	if len(out) == 0 {
		return response{status: 204, description: "No messages"}
	}
	return response{status: 200, description: "OK", body: map[string]any{"messages": out}}
}
