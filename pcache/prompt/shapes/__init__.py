"""Request shapes: each wire format (Chat Completions, Anthropic, Responses, Gemini, Bedrock,
OpenTelemetry and OpenInference spans) read into one chat-shaped record with JSON paths."""
