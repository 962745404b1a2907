package khala

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/khala/khaladb/khalabolt"
	"github.com/nerve-agents/nerve/khala/khaladb/khalapg"
)

// The admin commands (enroll-token, user, agent) reach a Khala's storage
// the same two ways, written once here so the command files need no
// backend of their own.

// onBoltFile runs direct on the bbolt database db when no process holds
// it, else viaServer with the admin file of the server that does (bbolt
// lets one process open a file). It reports which way it went
// (ViaDatabase, ViaServer).
func onBoltFile(db string, direct func(khaladb.Storage) error, viaServer func(adminInfo) error) (string, error) {
	st, err := khalabolt.Open(db, 200*time.Millisecond)
	if err == nil {
		defer st.Close()
		return ViaDatabase, direct(st)
	}
	if !errors.Is(err, khaladb.ErrLocked) {
		return "", err
	}
	info, err := readAdminFile(AdminFile(db))
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s is held by another process but %s does not exist; is that process a nerve khala serve of this version?", db, AdminFile(db))
	}
	if err != nil {
		return "", err
	}
	return ViaServer, viaServer(info)
}

// onPostgres runs fn on the PostgreSQL database dsn through one
// connection (migrating its schema first if need be): replicas hold no
// lock on it, so no server is asked.
func onPostgres(ctx context.Context, dsn string, fn func(khaladb.Storage) error) error {
	p, err := khalapg.Open(ctx, khalapg.Options{DSN: dsn, PoolSize: 1})
	if err != nil {
		return err
	}
	defer p.Close()
	return fn(p)
}
