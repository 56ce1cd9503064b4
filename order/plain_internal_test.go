package order

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// referenceRequestHash is RequestHash as it was first defined, kept as the
// reference the current implementation must match byte for byte: a
// heap buffer sized from the lines, hex.EncodeToString.
func referenceRequestHash(o *Order) string {
	appendStr := func(b []byte, s string) []byte {
		b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
		return append(b, s...)
	}
	b := make([]byte, 0, 128+len(o.Lines)*48)
	b = appendStr(b, hashVersion)
	b = appendStr(b, o.OrderID)
	b = appendStr(b, o.CustomerID)
	b = appendStr(b, o.Currency)
	b = binary.BigEndian.AppendUint64(b, uint64(len(o.Lines)))
	for _, l := range o.Lines {
		b = appendStr(b, l.SKU)
		b = binary.BigEndian.AppendUint64(b, uint64(l.Quantity))
		b = binary.BigEndian.AppendUint64(b, uint64(l.UnitPriceMinor))
	}
	b = binary.BigEndian.AppendUint64(b, uint64(o.TotalMinor))
	b = appendStr(b, o.PlacedAt.UTC().Format(time.RFC3339Nano))
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

const plainBody = `{
  "orderId": "ord-1", "customerId": "cust-1", "currency": "EUR",
  "lines": [{"sku": "SKU-1", "quantity": 2, "unitPriceMinor": 1999}, {"sku": "SKU-2", "quantity": 1, "unitPriceMinor": 500}],
  "totalMinor": 4498, "placedAt": "2026-11-30T10:00:00Z",
  "sentAt": "2026-11-30T10:00:01Z", "traceId": "abc"
}`

// checkPlainAgrees fails t unless decodePlain's verdict on body is one
// decodeStrict agrees with: whatever decodePlain accepts, decodeStrict
// accepts with an equal Order, and the Order's RequestHash is the
// reference's. It reports whether decodePlain accepted body.
func checkPlainAgrees(t *testing.T, body []byte) bool {
	t.Helper()
	var plain Order
	ok := len(body) <= MaxBodySize && decodePlain(body, &plain)
	var strict Order
	err := decodeStrict(body, &strict, "order")
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("decodePlain accepted %q, which decodeStrict rejects: %v", body, err)
	}
	if !reflect.DeepEqual(plain, strict) {
		t.Fatalf("decodePlain(%q) = %#v, decodeStrict = %#v", body, plain, strict)
	}
	if got, want := plain.RequestHash(), referenceRequestHash(&strict); got != want {
		t.Fatalf("RequestHash of %q = %s, the reference %s", body, got, want)
	}
	return true
}

// FuzzDecodePlainAgrees: the one-pass decoder never accepts what the
// strict decoder rejects, never decodes another order than it does, and
// the request hash of what it decodes is the reference's.
func FuzzDecodePlainAgrees(f *testing.F) {
	f.Add([]byte(plainBody))
	f.Add([]byte(`{"orderId":"a","customerId":"c","currency":"EUR","lines":[],"totalMinor":0,"placedAt":"2026-11-30T11:00:00.123456789+01:00"}`))
	f.Add([]byte(`{"lines":[{}],"totalMinor":-0}`))
	f.Add([]byte(`{"totalMinor":999999999999999999}`))
	f.Add([]byte(`{"totalMinor":9223372036854775807}`))
	f.Add([]byte(`{"totalMinor":01}`))
	f.Add([]byte(`{"totalMinor":1.0}`))
	f.Add([]byte(`{"placedAt":"2026-11-30T10:00:00z"}`))
	f.Add([]byte(`{"placedAt":null,"sentAt":null}`))
	f.Add([]byte(`{"orderId":"a","orderId":"b"}`))
	f.Add([]byte(`{"OrderId":"a"}`))
	f.Add([]byte(`{"lines":[{"sku":"x","sku":"y"}]}`))
	f.Add([]byte(`{"orderId":"a\u0062"}`))
	f.Add([]byte(`{"orderId":"é"}`))
	f.Add([]byte(`{} {}`))
	f.Add([]byte(` {"traceId":"t"} `))
	f.Fuzz(func(t *testing.T, body []byte) {
		checkPlainAgrees(t, body)
	})
}

// TestDecodePlainTakesProducerBodies: the one-pass decoder decodes what
// the project's producers send (encoding/json's encoding of an Order),
// with any white space, key order and time zone, so that the strict
// decoder's second pass is only paid for bodies no producer of the
// project sends; and every such body agrees with the strict decoder.
func TestDecodePlainTakesProducerBodies(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		o := randomOrder(r, false)
		body, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			body = reshuffle(r, o)
		}
		if !checkPlainAgrees(t, body) {
			t.Fatalf("decodePlain rejected a producer's body %s", body)
		}
	}
	for _, body := range []string{plainBody, `{"orderId":"a"}`, "{\"orderId\":\"a\",\n\t\"lines\":[ ]\r}"} {
		if !checkPlainAgrees(t, []byte(body)) {
			t.Errorf("decodePlain rejected %s", body)
		}
	}
	// And what it leaves to the strict decoder.
	for _, body := range []string{
		`{"orderId":"a","orderId":"a"}`, `{"orderID":"a"}`, `{"discount":1}`, `{"orderId":"\u0061"}`,
		`{"orderId":"é"}`, `{"totalMinor":1e3}`, `{"totalMinor":1234567890123456789}`, `{"traceId":null}`,
		`{"orderId":"a"}x`, `[]`, `{"lines":[{"sku":"a","Sku":"b"}]}`, `{"placedAt":"yesterday"}`,
	} {
		if checkPlainAgrees(t, []byte(body)) {
			t.Errorf("decodePlain accepted %s", body)
		}
	}
	// Every key repeated, and spelled in another case, in the order and
	// in a line.
	values := map[string]string{"orderId": `"a"`, "customerId": `"c"`, "currency": `"EUR"`, "lines": `[]`,
		"totalMinor": `1`, "placedAt": `"2026-11-30T10:00:00Z"`, "sentAt": `"2026-11-30T10:00:00Z"`, "traceId": `"t"`,
		"sku": `"s"`, "quantity": `1`, "unitPriceMinor": `1`}
	for key, v := range values {
		for _, kv := range []string{`"` + key + `":` + v + `,"` + key + `":` + v, `"` + strings.ToUpper(key[:1]) + key[1:] + `":` + v} {
			body := `{` + kv + `}`
			if key == "sku" || key == "quantity" || key == "unitPriceMinor" {
				body = `{"lines":[{"sku":"x"},{` + kv + `}]}`
			}
			if checkPlainAgrees(t, []byte(body)) {
				t.Errorf("decodePlain accepted %s", body)
			}
		}
	}
}

// TestRequestHashMatchesReference: over many orders, with long and
// non-ASCII strings, up to 200 lines (an encoding longer than the stack
// buffer) and times in other zones, RequestHash is the reference's.
func TestRequestHashMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		o := randomOrder(r, true)
		if got, want := o.RequestHash(), referenceRequestHash(&o); got != want {
			t.Fatalf("RequestHash(%+v) = %s, the reference %s", o, got, want)
		}
	}
}

// randomOrder returns an order with random content; wild allows strings
// outside the contract's alphabet and more lines than MaxLines.
func randomOrder(r *rand.Rand, wild bool) Order {
	str := func(n int) string {
		const alphabet = "abcXYZ019._:-"
		var b strings.Builder
		for range r.IntN(n) + 1 {
			if wild && r.IntN(8) == 0 {
				odd := []string{"é", "€", `"`, `\\`, "\x00", "\x1f", "\x7f", "𝄞", "<", ">", "&", "\u2028", "\u2029", "\xff"}
				b.WriteString(odd[r.IntN(len(odd))])
				continue
			}
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	n := r.IntN(4) + 1
	if wild && r.IntN(10) == 0 {
		n = r.IntN(200)
	}
	o := Order{OrderID: str(40), CustomerID: str(20), Currency: "EUR", TraceID: str(8)}
	if wild {
		o.Currency = str(4)
	}
	for range n {
		l := Line{SKU: str(20), Quantity: r.Int64N(MaxQuantity) + 1, UnitPriceMinor: r.Int64N(1 << 40)}
		if wild && r.IntN(4) == 0 {
			l.Quantity, l.UnitPriceMinor = r.Int64()-r.Int64(), r.Int64()-r.Int64()
		}
		o.Lines = append(o.Lines, l)
		o.TotalMinor += l.Quantity * l.UnitPriceMinor
	}
	zone := time.FixedZone("", (r.IntN(49)-24)*30*60)
	o.PlacedAt = time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(zone)
	if r.IntN(3) == 0 {
		o.PlacedAt = o.PlacedAt.Truncate(time.Second)
	}
	if r.IntN(2) == 0 {
		sent := o.PlacedAt.Add(time.Duration(r.Int64N(int64(time.Hour))))
		o.SentAt = &sent
	}
	return o
}

// reshuffle writes o as JSON by hand, its keys in a random order with
// random white space between the tokens.
func reshuffle(r *rand.Rand, o Order) []byte {
	ws := func() string { return []string{"", " ", "\n  ", "\t", "\r\n"}[r.IntN(5)] }
	q := func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	fields := []string{
		`"orderId"` + ws() + ":" + ws() + q(o.OrderID),
		`"customerId":` + ws() + q(o.CustomerID),
		`"currency":` + q(o.Currency),
		`"totalMinor":` + ws() + fmt.Sprint(o.TotalMinor),
		`"placedAt":` + q(o.PlacedAt),
		`"traceId":` + q(o.TraceID),
	}
	if o.SentAt != nil {
		fields = append(fields, `"sentAt":`+q(*o.SentAt))
	}
	var lines []string
	for _, l := range o.Lines {
		kv := []string{`"sku":` + ws() + q(l.SKU), `"quantity":` + fmt.Sprint(l.Quantity), `"unitPriceMinor":` + ws() + fmt.Sprint(l.UnitPriceMinor)}
		r.Shuffle(len(kv), func(i, j int) { kv[i], kv[j] = kv[j], kv[i] })
		lines = append(lines, "{"+ws()+strings.Join(kv, ","+ws())+ws()+"}")
	}
	fields = append(fields, `"lines":`+ws()+"["+ws()+strings.Join(lines, ws()+","+ws())+ws()+"]")
	r.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
	return []byte(ws() + "{" + ws() + strings.Join(fields, ","+ws()) + ws() + "}" + ws())
}

// checkDocumentsMatchMarshal fails t unless w.Documents encodes the order
// document and the event exactly as json.Marshal does.
func checkDocumentsMatchMarshal(t *testing.T, w Write) {
	t.Helper()
	docs, err := w.Documents()
	wantOrder, oerr := json.Marshal(w.Order)
	wantEvent, eerr := json.Marshal(w.Event)
	if oerr != nil || eerr != nil {
		if err == nil {
			t.Fatalf("Documents encoded %+v, which json.Marshal rejects: %v %v", w, oerr, eerr)
		}
		return
	}
	if err != nil {
		t.Fatalf("Documents(%+v): %v", w, err)
	}
	if got := string(docs[0].Body); got != string(wantOrder) {
		t.Fatalf("order document:\n got %s\nwant %s", got, wantOrder)
	}
	if got := string(docs[1].Body); got != string(wantEvent) {
		t.Fatalf("event:\n got %s\nwant %s", got, wantEvent)
	}
	// The two share a buffer: appending to the first must not change the second.
	_ = append(docs[0].Body, "xxxxxxxx"...)
	if string(docs[1].Body) != string(wantEvent) {
		t.Fatal("appending to the order document changed the event")
	}
}

// TestDocumentsMatchMarshal: over many writes, with strings encoding/json
// escapes, nil and empty lines, status hashes, a status change time, zones
// and years MarshalJSON rejects, Documents writes json.Marshal's bytes.
func TestDocumentsMatchMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 5000 {
		o := randomOrder(r, i%2 == 0)
		w := NewWrite(o, o.OrderID+"-m", referenceRequestHash(&o), o.PlacedAt.Add(time.Second))
		switch r.IntN(8) {
		case 0:
			w.Order.Lines = nil
		case 1:
			w.Order.Lines = []Line{}
		case 2:
			w.Order.StatusHashes = map[int64]string{int64(r.IntN(20)): "h", 10: "x<"}
		case 3:
			w.Order.StatusHashes = nil
		case 4:
			at := o.PlacedAt
			w.Order.StatusChangedAt, w.Order.Status, w.Order.Version, w.Order.StatusHashCount = &at, "paid", 2, 1
		case 5:
			w.Order.PlacedAt = time.Date(10000+r.IntN(5), 1, 1, 0, 0, 0, 0, time.UTC)
		case 6:
			w.Event.OccurredAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600+r.IntN(3)*60))
		case 7:
			w.Order.ProcessedAt = time.Date(-r.IntN(3), 1, 1, 0, 0, 0, 0, time.FixedZone("", -r.IntN(3)*3600))
		}
		checkDocumentsMatchMarshal(t, w)
	}
}

// FuzzDocumentsMatchMarshal is TestDocumentsMatchMarshal on the strings
// and integers the fuzzer finds.
func FuzzDocumentsMatchMarshal(f *testing.F) {
	f.Add("ord-1", "cust-1", "EUR", "SKU-1", int64(2), int64(1999), int64(0), "m-1", "<&>\u2028\x00é\xff", int64(1))
	f.Fuzz(func(t *testing.T, id, customer, currency, sku string, qty, price, nanos int64, messageID, hash string, unix int64) {
		at := time.Unix(unix, nanos)
		o := Order{OrderID: id, CustomerID: customer, Currency: currency, Lines: []Line{{SKU: sku, Quantity: qty, UnitPriceMinor: price}},
			TotalMinor: qty * price, PlacedAt: at}
		checkDocumentsMatchMarshal(t, NewWrite(o, messageID, hash, at.Add(time.Duration(nanos))))
	})
}

// checkStoredPlainAgrees fails t unless decodeStoredPlain's verdict on
// body is one json.Unmarshal agrees with, and reports the verdict.
func checkStoredPlainAgrees(t *testing.T, body []byte) bool {
	t.Helper()
	var plain OrderDocument
	ok := decodeStoredPlain(body, &plain)
	var std OrderDocument
	err := json.Unmarshal(body, &std)
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("decodeStoredPlain accepted %q, which json.Unmarshal rejects: %v", body, err)
	}
	if !reflect.DeepEqual(plain, std) {
		t.Fatalf("decodeStoredPlain(%q) = %#v, json.Unmarshal = %#v", body, plain, std)
	}
	return true
}

// storedForm returns the order document of w as Cosmos DB returns it,
// with its system properties appended.
func storedForm(t *testing.T, w Write) []byte {
	t.Helper()
	docs, err := w.Documents()
	if err != nil {
		t.Fatal(err)
	}
	b := docs[0].Body
	return append(b[:len(b)-1:len(b)-1], `,"_rid":"Ab0=","_self":"dbs/x/colls/y/docs/Ab0=/","_etag":"\"0000d9b0-0000-0d00-0000-67a1b2c30000\"","_attachments":"attachments/","_ts":1732960800}`...)
}

// TestDecodeStoredPlainTakesWrittenDocuments: the one-pass decoder reads
// the order documents this package writes, as the store returns them, and
// whatever it reads agrees with json.Unmarshal; what it leaves to
// json.Unmarshal is left.
func TestDecodeStoredPlainTakesWrittenDocuments(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for i := range 2000 {
		o := randomOrder(r, false)
		w := NewWrite(o, o.OrderID, referenceRequestHash(&o), o.PlacedAt.Add(time.Second))
		if i%3 == 0 {
			at := o.PlacedAt.Add(time.Minute)
			w.Order.StatusChangedAt, w.Order.Status, w.Order.Version = &at, "shipped", 3
			w.Order.StatusHashes, w.Order.StatusHashCount = map[int64]string{2: "h2", 3: "h3"}, 2
		}
		body := storedForm(t, w)
		if i%3 == 0 {
			// Documents leaves a recorded map to json.Marshal: still the form written.
			if b, err := json.Marshal(w.Order); err == nil {
				body = b
			}
		}
		if !checkStoredPlainAgrees(t, body) {
			t.Fatalf("decodeStoredPlain rejected a written document %s", body)
		}
	}
	for _, body := range []string{
		`{"id":"a","id":"b"}`, `{"ID":"a"}`, `{"extra":1}`, `{"id":"\u0061"}`, `{"totalMinor":1.5}`, `{"id":null}`,
		`{"statusHashes":{" 1":"a"}}`, `{"statusHashes":{"+1":"a"}}`, `{"statusHashes":{"01":"a"}}`, `{"statusHashes":{"1":"a","1":"b"}}`,
		`{"_x":true}`, `{"_x":"\q"}`, `{"_x":{}}`, `{"id":"a"} x`, `{"statusHashCount":99999999999999999999}`,
	} {
		if checkStoredPlainAgrees(t, []byte(body)) {
			t.Errorf("decodeStoredPlain accepted %s", body)
		}
	}
}

// FuzzDecodeStoredPlainAgrees: the one-pass decoder of stored order
// documents never accepts what json.Unmarshal rejects, nor decodes another
// document.
func FuzzDecodeStoredPlainAgrees(f *testing.F) {
	o := Order{OrderID: "ord-1", CustomerID: "c", Currency: "EUR", Lines: []Line{{SKU: "s", Quantity: 1, UnitPriceMinor: 5}}, TotalMinor: 5,
		PlacedAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
	w := NewWrite(o, "ord-1", "hash", o.PlacedAt)
	docs, _ := w.Documents()
	f.Add(docs[0].Body)
	f.Add([]byte(`{"statusHashes":{"2":"a","-3":"b"},"statusChangedAt":"2026-11-30T10:00:00+01:00","_ts":1,"_etag":"\"x\\u00e9\""}`))
	f.Add([]byte(`{"lines":null,"statusHashes":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		checkStoredPlainAgrees(t, body)
	})
}
