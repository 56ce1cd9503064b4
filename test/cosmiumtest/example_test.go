package cosmiumtest_test

import (
	"context"
	"fmt"
	"log"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
)

// A test calls cosmiumtest.Start(t), which stops the server when the test
// ends. Other callers, such as an end-to-end harness, use NewServer and Close.
func ExampleNewServer() {
	ctx := context.Background()
	srv, err := cosmiumtest.NewServer(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	cred, err := azcosmos.NewKeyCredential(srv.Key)
	if err != nil {
		log.Fatal(err)
	}
	client, err := azcosmos.NewClientWithKey(srv.Endpoint, cred, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	resp, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "sales"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.RawResponse.StatusCode, resp.DatabaseProperties.ID)
	// Output: 201 sales
}
