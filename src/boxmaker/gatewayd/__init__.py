"""gatewayd, reserved: the channel that carries a chat network's messages into sessions
(SPEC section 18), on the kit of `serving`."""
