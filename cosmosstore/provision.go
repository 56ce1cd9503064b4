package cosmosstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// CreateDatabaseAndContainer creates the database and a container
// partitioned on partitionKeyPath, as New's Store on them needs, for the
// emulators only: in Azure, Bicep creates them, and the worker's data-plane
// role could not. partitionKeyPath is a top-level field, such as
// "/tenantId", the same New takes.
//
// The container gets the partition key path (Hash, version 2) and a default
// time to live of -1, which turns per-document TTL on without expiring
// anything by default. The database gets no provisioned throughput.
//
// It is idempotent: a database or container that exists already is left as
// it is, but an existing container partitioned on another path is an error
// naming both paths, because the store's documents could not share a
// partition in it, and so is one that reports a default TTL other than -1
// (see RequiredDefaultTTL; one that reports none, such as cosmium's, is left
// to Store.Check). Concurrent calls for the same names are safe: one creates
// each resource, the others find it.
func CreateDatabaseAndContainer(ctx context.Context, c *azcosmos.Client, database, container, partitionKeyPath string) error {
	if err := checkPartitionKeyPath(partitionKeyPath); err != nil {
		return err
	}
	if c == nil {
		return errors.New("cosmosstore: CreateDatabaseAndContainer needs a client")
	}
	if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: database}, nil); err != nil && !isStatus(err, http.StatusConflict) {
		return fmt.Errorf("cosmosstore: create database %q: %w", database, err)
	}
	db, err := c.NewDatabase(database)
	if err != nil {
		return fmt.Errorf("cosmosstore: database %q: %w", database, err)
	}
	ttl := int32(-1)
	props := azcosmos.ContainerProperties{
		ID:                container,
		DefaultTimeToLive: &ttl,
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{
			Kind:    azcosmos.PartitionKeyKindHash,
			Paths:   []string{partitionKeyPath},
			Version: 2,
		},
	}
	_, err = db.CreateContainer(ctx, props, nil)
	switch {
	case err == nil:
		return nil
	case !isStatus(err, http.StatusConflict):
		return fmt.Errorf("cosmosstore: create container %q in database %q: %w", container, database, err)
	}
	// The container exists: check that the store can use it.
	cc, err := db.NewContainer(container)
	if err != nil {
		return fmt.Errorf("cosmosstore: container %q: %w", container, err)
	}
	resp, err := cc.Read(ctx, nil)
	if err != nil {
		return fmt.Errorf("cosmosstore: read container %q in database %q: %w", container, database, err)
	}
	if resp.ContainerProperties == nil {
		return fmt.Errorf("cosmosstore: read container %q in database %q: no properties in the response", container, database)
	}
	if paths := resp.ContainerProperties.PartitionKeyDefinition.Paths; !slices.Equal(paths, []string{partitionKeyPath}) {
		return fmt.Errorf("cosmosstore: container %q in database %q exists with partition key paths %q, want [%q]",
			container, database, paths, partitionKeyPath)
	}
	if ttl := resp.ContainerProperties.DefaultTimeToLive; ttl != nil && *ttl != RequiredDefaultTTL {
		return fmt.Errorf("cosmosstore: container %q in database %q exists with the default time to live (defaultTtl) %d, want %d: set it with az cosmosdb sql container update … --ttl %d (Store.Check refuses it too)",
			container, database, *ttl, RequiredDefaultTTL, RequiredDefaultTTL)
	}
	return nil
}

// isStatus reports whether err is an HTTP response with the status code.
func isStatus(err error, status int) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == status
}
