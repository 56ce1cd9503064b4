package worker

// HasLinkCredit is hasLinkCredit, for the black-box tests.
var HasLinkCredit = hasLinkCredit
