package member

import (
	"context"
	"log/slog"
	"slices"
	"sync"
)

// hooks calls the OnAssigned and OnRevoked hooks of one Runtime, one call
// at a time across all its members (doc.go rule 12), and turns a
// panicking hook into a logged error.
type hooks struct {
	mu         sync.Mutex
	onAssigned func(ctx context.Context, shards []int)
	onRevoked  func(ctx context.Context, shards []int)
	log        *slog.Logger
}

func (h *hooks) assigned(ctx context.Context, shards []int) {
	h.call(ctx, "OnAssigned", h.onAssigned, shards)
}

func (h *hooks) revoked(ctx context.Context, shards []int) {
	h.call(ctx, "OnRevoked", h.onRevoked, shards)
}

func (h *hooks) call(ctx context.Context, name string, fn func(context.Context, []int), shards []int) {
	if fn == nil || len(shards) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			h.log.Error("hook panicked", slog.String("hook", name), slog.String("member", MemberID(ctx)),
				slog.Any("shards", shards), slog.Any("panic", p))
		}
	}()
	fn(ctx, slices.Clone(shards))
}
