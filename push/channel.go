package push

import "strings"

// userPrefix starts the pub/sub channel of every buyer's order events.
const userPrefix = "seckill:events:user:"

// UserChannel is the pub/sub channel of one buyer's order events. Each api
// instance subscribes only to the buyers connected to it.
func UserChannel(userID string) string { return userPrefix + userID }

// channelUser is UserChannel's inverse: the buyer a channel belongs to.
func channelUser(channel string) string { return strings.TrimPrefix(channel, userPrefix) }
