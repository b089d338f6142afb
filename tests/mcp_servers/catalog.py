"""A registry of more than 300 tools for measuring `find_tool`'s ranking: brokerd's own, and
thirty MCP servers of the kinds people connect (their tools named and described as such
servers describe theirs: many alike, CRUD over a few kinds of thing each)."""

from __future__ import annotations

from boxmaker.brokerd.registry import McpTool, Registry, builtin_registry
from boxmaker.proto import ToolSchema

_VERBS = {
    "create": "Create a new {thing} in {where}.",
    "list": "List the {things} in {where}, newest first, a page at a time.",
    "get": "Get one {thing} from {where} by its id, with all its fields.",
    "update": "Update the fields of an existing {thing} in {where}.",
    "delete": "Delete a {thing} from {where} for good.",
    "search": "Search the {things} of {where} by words in them.",
}

# server: (where, the kinds of thing it holds, its own tools beyond create/list/...)
_SERVERS: dict[str, tuple[str, tuple[str, ...], dict[str, str]]] = {
    "github": ("a GitHub repository", ("issue", "pull_request", "branch"),
               {"merge_pull_request": "Merge an open pull request into its base branch."}),
    "gitlab": ("a GitLab project", ("merge_request", "pipeline"),
               {"retry_pipeline": "Run a failed CI pipeline again."}),
    "calendar": ("the owner's calendar", ("event", "reminder"),
                 {"find_free_time": "Find free time slots when the owner has no meeting."}),
    "mail": ("the owner's mailbox", ("message", "draft", "label"),
             {"send_message": "Send an email message to one or more recipients."}),
    "slack": ("a Slack workspace", ("channel", "message"),
              {"post_message": "Post a chat message to a Slack channel."}),
    "notes": ("the notes app", ("note", "notebook"),
              {"append_to_note": "Append a paragraph of text to the end of a note."}),
    "todo": ("the to-do list", ("task", "project"),
             {"complete_task": "Mark a to-do task as done."}),
    "weather": ("the weather service", ("alert",),
                {"get_forecast": "The weather forecast (temperature, rain, wind) for the next "
                                 "days at a city or place.",
                 "get_current_conditions": "The weather right now at a city: temperature, "
                                           "humidity and wind."}),
    "maps": ("the maps service", ("place",),
             {"get_directions": "Driving, walking or transit directions between two places.",
              "geocode": "Turn a street address into latitude and longitude."}),
    "postgres": ("a PostgreSQL database", ("table", "index"),
                 {"run_query": "Run a read-only SQL query against the database and return "
                               "the rows."}),
    "sqlite": ("an SQLite database file", ("table",),
               {"run_sql": "Run an SQL statement on the SQLite database."}),
    "redis": ("a Redis server", ("key",),
              {"publish": "Publish a message on a Redis pub/sub channel."}),
    "s3": ("an S3 bucket", ("object", "bucket"),
           {"presign_url": "Make a time-limited download link for an object in a bucket."}),
    "drive": ("the owner's cloud drive", ("document", "folder"),
              {"share_document": "Share a drive document with another person by email."}),
    "jira": ("a Jira project", ("ticket", "sprint", "epic"),
             {"transition_ticket": "Move a Jira ticket to another status of its workflow."}),
    "linear": ("a Linear team", ("issue", "cycle"),
               {"assign_issue": "Assign a Linear issue to a member of the team."}),
    "notion": ("a Notion workspace", ("page", "database"),
               {"query_database": "Filter and sort the rows of a Notion database."}),
    "spotify": ("the music player", ("playlist", "track"),
                {"play": "Start playing a song, an album or a playlist.",
                 "pause": "Pause the music that is playing."}),
    "contacts": ("the address book", ("contact", "group"),
                 {"find_phone_number": "Look up the phone number of a person."}),
    "bank": ("the owner's bank account", ("transaction", "payee"),
             {"get_balance": "The current balance of the owner's bank account.",
              "transfer_money": "Send money from the owner's account to a payee."}),
    "shop": ("the online shop", ("order", "product", "cart_item"),
             {"checkout": "Pay for the items in the cart and place the order."}),
    "docker": ("the Docker daemon", ("container", "image", "volume"),
               {"container_logs": "The last lines a running container printed (its logs)."}),
    "kubernetes": ("a Kubernetes cluster", ("pod", "deployment"),
                   {"scale_deployment": "Change how many replicas a deployment runs."}),
    "browser": ("the web browser", ("tab", "bookmark"),
                {"fetch_page": "Download a web page by its URL and give its text.",
                 "screenshot": "Take a screenshot of the page open in a tab."}),
    "search": ("the web search engine", (),
               {"web_search": "Search the web for pages matching a query and give the top "
                              "results with their links."}),
    "translate": ("the translation service", ("glossary",),
                  {"translate_text": "Translate a text from one language to another."}),
    "home": ("the smart home", ("device", "scene"),
             {"set_thermostat": "Set the heating thermostat to a temperature.",
              "turn_on_light": "Turn on a light in a room of the house."}),
    "photos": ("the photo library", ("album", "photo"),
               {"find_faces": "Find photos of a person by their face."}),
    "time": ("the clock service", (),
             {"convert_time": "Convert a time from one time zone to another time zone.",
              "get_current_time": "The current time in a given IANA time zone."}),
    "rss": ("the feed reader", ("feed", "article"),
            {"mark_read": "Mark articles of a feed as read."}),
}  # fmt: skip


def _tools() -> dict[str, list[McpTool]]:
    tools: dict[str, list[McpTool]] = {}
    for server, (where, things, own) in _SERVERS.items():
        listed = []
        for thing in things:
            words = thing.replace("_", " ")
            for verb, said in _VERBS.items():
                name = f"{verb}_{thing}s" if verb in ("list", "search") else f"{verb}_{thing}"
                listed.append((name, said.format(thing=words, things=f"{words}s", where=where)))
        listed += own.items()
        empty = {"type": "object", "properties": {}}
        schemas = [(ToolSchema(f"{server}.{name}", text, empty), name) for name, text in listed]
        tools[server] = [McpTool(schema, name, read_only=False) for schema, name in schemas]
    return tools


def catalog() -> Registry:
    """brokerd's own tools, then every server's."""
    registry = builtin_registry()
    for server, tools in _tools().items():
        registry = registry.with_server(server, tools)
    return registry


# A request as a model words it, and the tool that must come first.
QUERIES = [
    ("read the contents of a file", "read_file"),
    ("write text to a file", "write_file"),
    ("run a shell command", "shell"),
    ("what is the weather forecast for tomorrow", "weather.get_forecast"),
    ("send an email", "mail.send_message"),
    ("post in a slack channel", "slack.post_message"),
    ("add an event to my calendar", "calendar.create_event"),
    ("delete a calendar event", "calendar.delete_event"),
    ("when am I free for a meeting", "calendar.find_free_time"),
    ("open a github issue", "github.create_issue"),
    ("merge the pull request", "github.merge_pull_request"),
    ("convert 3pm Tokyo time to Paris time zone", "time.convert_time"),
    ("directions to the station", "maps.get_directions"),
    ("run an SQL query on postgres", "postgres.run_query"),
    ("play a song", "spotify.play"),
    ("search the web", "search.web_search"),
    ("translate this text into German", "translate.translate_text"),
    ("turn on the kitchen light", "home.turn_on_light"),
    ("show the logs of a docker container", "docker.container_logs"),
    ("scale the kubernetes deployment", "kubernetes.scale_deployment"),
    ("download a web page", "browser.fetch_page"),
    ("phone number of Alice", "contacts.find_phone_number"),
    ("mark the task done", "todo.complete_task"),
    ("list jira tickets", "jira.list_tickets"),
]

# Requests whose words are no tool's (only their sense is): BM25 cannot put the right tool
# first, but it is among the schemas `find_tool` gives.
WITHIN_FOUND = [
    ("how much money is in my bank account", "bank.get_balance"),
    ("is it going to rain", "weather.get_forecast"),
]
