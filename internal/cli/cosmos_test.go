package cli_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
)

// TestCreateCosmosContainerOnCosmium: a missing database or container is
// created only when asked for, else refused naming COSMOS_DATABASE or
// COSMOS_CONTAINER, with nothing created; what was created is reported;
// the container is usable, and found again; a wrong key and a closed port
// name COSMOS_KEY and COSMOS_ENDPOINT without the SDK's dump.
func TestCreateCosmosContainerOnCosmium(t *testing.T) {
	srv := cosmiumtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := cli.CosmosClient(srv.Endpoint, srv.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	create := func(database, container string, createDatabase, createContainer bool) (cli.Created, error) {
		return cli.CreateCosmosContainer(ctx, client, srv.Endpoint, database, container, order.PartitionKeyPath, createDatabase, createContainer)
	}
	_, err = create("ordres", "orders", false, true)
	for _, want := range []string{`database "ordres" does not exist at COSMOS_ENDPOINT=` + srv.Endpoint, "set COSMOS_DATABASE (-cosmos-database)", "COSMOS_CREATE_DATABASE=true"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing database: %v; want %q in it", err, want)
		}
	}
	if _, err := create("ordres", "orders", false, true); err == nil {
		t.Error("the refused database was created")
	}
	// A database asked for, with a container that was not: neither is created.
	if _, err := create("other", "x", true, false); err == nil || !strings.Contains(err.Error(), `container "x" does not exist`) {
		t.Errorf("missing container in a missing database: %v", err)
	}
	if _, err := create("other", "x", false, true); err == nil || !strings.Contains(err.Error(), `database "other" does not exist`) {
		t.Errorf("the database of a refused container was created: %v", err)
	}
	if created, err := create("orders", "orders", true, true); err != nil || created != (cli.Created{Database: true, Container: true}) {
		t.Fatalf("asked to create the database and container: created %+v, %v", created, err)
	}
	if created, err := create("orders", "orders", false, false); err != nil || created != (cli.Created{}) {
		t.Fatalf("again: created %+v, %v; want both found", created, err)
	}
	for range 2 {
		_, err = create("orders", "ordres", false, false)
		for _, want := range []string{`container "ordres" does not exist in database "orders" at COSMOS_ENDPOINT=` + srv.Endpoint,
			"set COSMOS_CONTAINER (-cosmos-container)", "COSMOS_CREATE_OTHER_CONTAINER=true"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("missing container: %v; want %q in it", err, want)
			}
		}
	}
	if created, err := create("orders", "invoices", false, true); err != nil || created != (cli.Created{Container: true}) {
		t.Fatalf("asked to create another container: created %+v, %v", created, err)
	}
	store, err := cosmosstore.New(client, "orders", "orders", order.PartitionKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Check(ctx); err != nil {
		t.Fatalf("the container created is not usable: %v", err)
	}

	wrong, err := cli.CosmosClient(srv.Endpoint, strings.Repeat("A", 86)+"==", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cli.CreateCosmosContainer(ctx, wrong, srv.Endpoint, "orders", "orders", order.PartitionKeyPath, false, false)
	checkExplained(t, "wrong key", err, []string{"COSMOS_KEY (-cosmos-key)", "COSMOS_ENDPOINT=" + srv.Endpoint, "401 Unauthorized"})
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong key: %v does not wrap the 401", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/"
	l.Close()
	unreachable, err := cli.CosmosClient(closed, srv.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cli.CreateCosmosContainer(ctx, unreachable, closed, "orders", "orders", order.PartitionKeyPath, false, false)
	checkExplained(t, "closed port", err, []string{"cannot reach Cosmos DB at COSMOS_ENDPOINT=" + closed, "connection refused"})
}

// checkExplained checks that err names what want says, on one line,
// without the SDK's dump of the response.
func checkExplained(t *testing.T, name string, err error, want []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", name)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %v\nwant %q in it", name, err, w)
		}
	}
	if strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "RESPONSE") || strings.Contains(err.Error(), "-----") {
		t.Errorf("%s: the SDK's dump is shown:\n%v", name, err)
	}
}
