"""Chat platforms (Slack, Telegram): platform payloads in as `Message`s, `ReplyEvent`s out as
platform calls. The adapters convert and render; the assistant behind `submit` decides."""
