package cli

import (
	"fmt"
	"unicode/utf8"
)

// MaxMessageIDLength is the longest MessageId Service Bus accepts, in
// characters.
const MaxMessageIDLength = 128

// CheckMessageID reports a MessageId Service Bus would refuse: one longer
// than MaxMessageIDLength characters. Service Bus refuses such a send, and
// the SDK retries it until its deadline, so that the sender sees only
// "context deadline exceeded"; a command checks every id before it sends
// anything. The error names the limit and the id.
func CheckMessageID(id string) error {
	if n := utf8.RuneCountInString(id); n > MaxMessageIDLength {
		return fmt.Errorf("MessageId %q has %d characters; Service Bus accepts at most %d and refuses the send", id, n, MaxMessageIDLength)
	}
	return nil
}
