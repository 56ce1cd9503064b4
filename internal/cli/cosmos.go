package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
)

// Created says what CreateCosmosContainer created: each is true only for a
// resource that was missing and is now there.
type Created struct {
	Database  bool
	Container bool
}

// CreateCosmosContainer is what COSMOS_CREATE_CONTAINER=true does at start
// on an emulator: it creates container in database when it is missing
// (cosmosstore.CreateDatabaseAndContainer), partitioned on partitionKeyPath
// as the store needs.
//
// It creates a missing database only when createDatabase is true, and a
// missing container only when createContainer is true. Without it, a
// missing database is an error naming COSMOS_DATABASE, and a missing
// container one naming COSMOS_CONTAINER: most likely the name is misspelt,
// and creating it would silently start a new, empty store beside the real
// one, into which the worker would then write (a redelivered order would be
// created again there). Both are checked before anything is created. A key
// the account refuses and an endpoint that cannot be reached are errors
// naming COSMOS_KEY and COSMOS_ENDPOINT, with the status or the network
// error only, not the SDK's dump of the response (explainCosmos). It
// reports what it created; concurrent callers may each report a resource
// one of them created.
func CreateCosmosContainer(ctx context.Context, client *azcosmos.Client, endpoint, database, container, partitionKeyPath string, createDatabase, createContainer bool) (Created, error) {
	var created Created
	db, err := client.NewDatabase(database)
	if err != nil {
		return created, fmt.Errorf("COSMOS_DATABASE (-cosmos-database) %q: %w", database, err)
	}
	_, err = db.Read(ctx, nil)
	switch {
	case err == nil:
		cc, err := db.NewContainer(container)
		if err != nil {
			return created, fmt.Errorf("COSMOS_CONTAINER (-cosmos-container) %q: %w", container, err)
		}
		_, err = cc.Read(ctx, nil)
		switch {
		case err == nil:
		case isNotFound(err):
			created.Container = true
		default:
			return created, explainCosmos(err, endpoint, "read the container")
		}
	case isNotFound(err):
		created.Database, created.Container = true, true
	default:
		return created, explainCosmos(err, endpoint, "read the database")
	}
	if created.Database && !createDatabase {
		return Created{}, fmt.Errorf("database %q does not exist at COSMOS_ENDPOINT=%s: set COSMOS_DATABASE (-cosmos-database) to the database that holds the orders, "+
			"or COSMOS_CREATE_DATABASE=true (-cosmos-create-database) to create a new, empty one", database, endpoint)
	}
	if created.Container && !createContainer {
		return Created{}, fmt.Errorf("container %q does not exist in database %q at COSMOS_ENDPOINT=%s: set COSMOS_CONTAINER (-cosmos-container) to the container that holds the orders, "+
			"or COSMOS_CREATE_OTHER_CONTAINER=true (-cosmos-create-other-container) to create a new, empty one", container, database, endpoint)
	}
	if err := cosmosstore.CreateDatabaseAndContainer(ctx, client, database, container, partitionKeyPath); err != nil {
		return Created{}, explainCosmos(err, endpoint, "create the database and container")
	}
	return created, nil
}

// isNotFound reports whether err is Cosmos DB's 404.
func isNotFound(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound
}

// explainCosmos returns err, the failure of a command's call to Cosmos DB
// at endpoint while it tried to do step, with the setting to fix: a 401
// names COSMOS_KEY, a 403 the identity's role, an endpoint that does not
// answer COSMOS_ENDPOINT. Its message holds the status, or the network
// error, not the SDK's multi-line dump of the response; the error it wraps
// is still err. Other errors, and nil, are returned unchanged.
func explainCosmos(err error, endpoint, step string) error {
	if err == nil {
		return nil
	}
	var re *azcore.ResponseError
	var msg string
	switch {
	case errors.As(err, &re) && re.StatusCode == http.StatusUnauthorized:
		msg = fmt.Sprintf("the account at COSMOS_ENDPOINT=%s refused COSMOS_KEY (-cosmos-key): it is not this account's key "+
			"(an emulator takes its well-known key, which scripts/local.sh env prints; in Azure leave COSMOS_KEY unset and use Entra ID)", endpoint)
	case errors.As(err, &re) && re.StatusCode == http.StatusForbidden:
		msg = fmt.Sprintf("the account at COSMOS_ENDPOINT=%s refused this identity: assign it the data-plane role %q (AZURE_CLIENT_ID names the managed identity), "+
			"or the account's firewall refuses this address", endpoint, cosmosstore.DataContributorRole)
	case errors.As(err, &re):
		return err // a status the caller's error already explains
	case isNetwork(err):
		msg = fmt.Sprintf("cannot reach Cosmos DB at COSMOS_ENDPOINT=%s (-cosmos-endpoint): %s: check the endpoint and that the emulator runs", endpoint, networkCause(err))
	default:
		return err
	}
	status := ""
	if re != nil {
		status = fmt.Sprintf(" (%d %s)", re.StatusCode, http.StatusText(re.StatusCode))
	}
	return &explained{msg: fmt.Sprintf("cosmos db: %s%s: %s", step, status, msg), err: err}
}

// explained is an error whose message replaces that of the error it wraps.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

// isNetwork reports whether err is a failure to connect or to talk to the
// endpoint: a dial, a DNS lookup, a reset, a TLS handshake.
func isNetwork(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	var ue *url.Error
	return errors.As(err, &op) || errors.As(err, &dns) || errors.As(err, &ue)
}

// networkCause returns the innermost network error's text, such as "dial
// tcp 127.0.0.1:2: connect: connection refused".
func networkCause(err error) string {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Error()
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}
