package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rscoord/rscoord/client/member"
)

// Order is the JSON payload of one record.
type Order struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Qty      int    `json:"qty"`
}

func (o Order) json() string {
	b, _ := json.Marshal(o) // a struct of strings and ints always encodes
	return string(b)
}

// Store adds quantities per customer and counts orders, in one step; it
// returns the count of orders so far.
type Store interface {
	Add(ctx context.Context, deltas map[string]int64, orders int64) (int64, error)
}

// App is the consumer's logic, free of Redis and the coordinator.
type App struct {
	Store Store
	// Counted, if set, is called with the order count after each write.
	Counted func(total int64)
}

// HandleBatch adds up one batch of one shard and writes it in one step.
// A record that is not an order is acknowledged and skipped (a retry
// would not fix it); a failed write returns the error, and the Runtime
// retries the batch in place (WithHandlerRetry), so later orders of the
// same customers wait instead of overtaking it.
func (a *App) HandleBatch(ctx context.Context, msgs []*member.Message) error {
	deltas := map[string]int64{}
	var orders int64
	for _, m := range msgs {
		var o Order
		if err := m.JSON(member.PayloadField, &o); err != nil || o.Customer == "" {
			continue
		}
		deltas[o.Customer] += int64(o.Qty)
		orders++
	}
	total, err := a.Store.Add(ctx, deltas, orders)
	if err != nil {
		return fmt.Errorf("write %d orders: %w", orders, err)
	}
	if err := member.AckAll(ctx, msgs); err != nil {
		return err
	}
	if a.Counted != nil {
		a.Counted(total)
	}
	return nil
}
