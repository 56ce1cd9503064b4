package cli

import (
	"fmt"
	"unicode/utf16"
)

// MaxMessageIDLength is the longest MessageId Service Bus accepts, in
// UTF-16 code units. The documentation says "characters"; Service Bus and
// its reference SDK are .NET, whose string length counts UTF-16 code
// units, so a character outside the Basic Multilingual Plane (an emoji)
// counts twice. That is inferred, not documented: under this reading no id
// a command lets through is refused; under the other it turns away only ids
// with characters outside the BMP that Service Bus might have accepted.
const MaxMessageIDLength = 128

// MessageIDLength returns the length of id as Service Bus measures it: in
// UTF-16 code units. A byte that is not valid UTF-8 counts as one unit, as
// the U+FFFD it decodes to.
func MessageIDLength(id string) int {
	n := 0
	for _, r := range id {
		n += utf16.RuneLen(r)
	}
	return n
}

// CheckMessageID reports a MessageId Service Bus would refuse: one longer
// than MaxMessageIDLength UTF-16 code units. Service Bus refuses such a
// send, and the SDK retries it until its deadline, so that the sender sees
// only "context deadline exceeded"; a command checks every id before it
// sends anything. The error names the limit and the id.
func CheckMessageID(id string) error {
	if n := MessageIDLength(id); n > MaxMessageIDLength {
		return fmt.Errorf("MessageId %q has %d characters; Service Bus accepts at most %d and refuses the send (it counts UTF-16 code units: a character outside the Basic Multilingual Plane, such as an emoji, counts as 2)", id, n, MaxMessageIDLength)
	}
	return nil
}
