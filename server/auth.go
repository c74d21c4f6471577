package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rscoord/rscoord/cluster"
	"github.com/rscoord/rscoord/gateway/auth"
)

// openAuthenticator sets up authentication: the token secret and the
// bootstrap admin in the data directory, the users file. Nil with auth
// off. Revoked tokens are kept in the data directory or, in the cluster
// mode (cli not nil), in etcd, shared by every replica: the returned
// closer ends the following of other replicas' revocations and closes the
// authenticator. API tokens are read from apiTokens, the store.
func (c *Config) openAuthenticator(ctx context.Context, log *slog.Logger, cli *clientv3.Client, apiTokens auth.APITokenSource) (*auth.Authenticator, func() error, error) {
	if c.Authenticator != nil {
		return c.Authenticator, c.Authenticator.Close, nil
	}
	if !c.Auth {
		return nil, func() error { return nil }, nil // gateway.New logs the warning
	}
	secret, err := auth.LoadOrCreateSecret(c.DataDir, c.TokenSecret)
	if err != nil {
		return nil, nil, fmt.Errorf("auth: %w", err)
	}
	var users []auth.User
	if c.UsersFile != "" {
		if users, err = auth.LoadUsersFile(c.UsersFile); err != nil {
			return nil, nil, fmt.Errorf("--users: %w", err)
		}
	}
	if !slices.ContainsFunc(users, func(u auth.User) bool { return u.Username == auth.AdminUsername }) {
		admin, generated, err := auth.BootstrapAdmin(c.DataDir, c.AdminPassword, secret, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("auth: %w", err)
		}
		if generated != "" {
			log.Warn("generated the password of the bootstrap admin: read it from the file, then delete the file (only its hash is needed); set RSCOORD_ADMIN_PASSWORD to choose one",
				slog.String("user", auth.AdminUsername), slog.String("file", generated))
		}
		users = append(users, admin)
	} else {
		log.Info("the users file defines admin; no bootstrap admin")
	}
	var previous [][]byte
	for _, p := range c.PreviousTokenSecrets {
		previous = append(previous, []byte(p))
	}
	var revocations *auth.Revocations
	stop := func() {}
	if cli != nil {
		revocations, stop, err = sharedRevocations(ctx, cli, c.Cluster.EtcdPrefix, log)
	} else {
		revocations, err = auth.OpenRevocations(c.DataDir, 0, nil)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("auth: %w", err)
	}
	authn, err := auth.New(auth.Config{Users: users, Secret: secret, PreviousSecrets: previous,
		TokenTTL: c.TokenTTL, Revocations: revocations, APITokens: apiTokens})
	if err != nil {
		stop()
		return nil, nil, errors.Join(fmt.Errorf("auth: %w", err), revocations.Close())
	}
	log.Info("authentication on", slog.Int("users", len(users)), slog.Bool("memberAuth", !c.Gateway.NoMemberAuth),
		slog.Duration("tokenTTL", authn.TokenTTL()), slog.Bool("metricsPublic", c.Gateway.MetricsPublic))
	return authn, func() error { stop(); return authn.Close() }, nil
}

// sharedRevocations opens the revocations of the cluster mode: every one
// stored in etcd is loaded before it returns (so a new owner refuses what
// the last one revoked), and later ones are followed until the returned
// stop is called.
func sharedRevocations(ctx context.Context, cli *clientv3.Client, etcdPrefix string, log *slog.Logger) (*auth.Revocations, func(), error) {
	e := cluster.NewRevocations(cli, etcdPrefix, log)
	revs := auth.OpenSharedRevocations(e, 0, nil)
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	rev, err := e.Load(lctx, revs)
	cancel()
	if err != nil {
		return nil, func() {}, err
	}
	fctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Follow(fctx, revs, rev)
	}()
	return revs, func() { stop(); <-done }, nil
}
