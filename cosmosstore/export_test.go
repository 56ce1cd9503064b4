package cosmosstore

// Classify exposes classify to the black-box tests, which apply it to errors
// that the SDK returns from calls the Store does not make itself.
var Classify = classify

// HasUntracedTwin reports whether s sends some calls through an untraced
// twin (ClientOptions.Untraced).
func HasUntracedTwin(s *Store) bool { return s.untraced != nil }
