package app

import (
	"context"

	"go.uber.org/zap"

	"github.com/doclog/doclog/projectors/analytics"
)

// clickHouse is the analytics projector's connection. It is made in Run,
// once ClickHouse answers, since analytics.New connects and creates the
// schema; connect is retried until then.
type clickHouse struct {
	cfg    analytics.Config
	logger *zap.Logger
	p      *analytics.Projector
}

func (c *clickHouse) connect(ctx context.Context) error {
	p, err := analytics.New(ctx, c.cfg, c.logger)
	if err != nil {
		return err
	}
	c.p = p
	return nil
}

func (c *clickHouse) ping(ctx context.Context) error { return c.p.Ping(ctx) }

func (c *clickHouse) close() {
	if c.p != nil {
		_ = c.p.Close()
	}
}
