package cosmosstore

// Classify exposes classify to the black-box tests, which apply it to errors
// that the SDK returns from calls the Store does not make itself.
var Classify = classify
