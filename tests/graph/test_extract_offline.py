"""Golden tests for the offline extractor on text we wrote."""

from graph.models import entity_key
from ingest.extract_offline import document_words, extract

TEXT = """When `payments-api` returns HTTP 503, check `payments_db_pool_wait_seconds`.
The pool size is `pool.max_size` on ledger-db-primary.prod.quillfeather.internal.

Errors PAY-5031 and ERR_CONN_RESET come from `reconcile_ledger_batch()` and
`TokenRefresher.rotate_keys`; see /etc/quillfeather/sync.toml. The Incident Commander
pages the Data Platform team."""


def test_identifiers_become_typed_entities() -> None:
    entities, _ = extract(TEXT)
    types = {e.name: e.type for e in entities}
    assert types["payments-api"] == "identifier"  # code-marked; nothing says "service"
    assert types["HTTP 503"] == "http_status"
    assert types["payments_db_pool_wait_seconds"] == "metric"
    assert types["pool.max_size"] == "config_key"
    assert types["ledger-db-primary.prod.quillfeather.internal"] == "hostname"
    assert types["PAY-5031"] == "error_code" and types["ERR_CONN_RESET"] == "error_code"
    assert types["reconcile_ledger_batch"] == "function"
    assert types["TokenRefresher.rotate_keys"] == "function"
    assert types["/etc/quillfeather/sync.toml"] == "path"
    assert types["Incident Commander"] == "name" and types["Data Platform"] == "name"
    assert "When" not in " ".join(types)  # sentence-initial words are not names


def test_relations_link_entities_of_one_sentence_and_are_deterministic() -> None:
    entities, relations = extract(TEXT)
    pairs = {(r.source, r.target) for r in relations}
    assert ("HTTP 503", "payments-api") in pairs or ("payments-api", "HTTP 503") in pairs
    linked = {frozenset((r.source, r.target)) for r in relations}
    assert frozenset(("payments-api", "PAY-5031")) not in linked  # different sentences
    assert extract(TEXT) == (entities, relations)
    assert extract("no identifiers here at all.") == ([], [])


def test_entity_key_normalises_case_punctuation_and_plurals() -> None:
    assert entity_key("`Incident Commanders`") == entity_key("incident commander")
    assert entity_key("ERR_CONN_RESET") == "err_conn_reset"
    assert entity_key("status") == "status" and entity_key("access") == "access"
    assert entity_key("Retry Policies") == "retry policy"


def test_initials_and_name_particles_stay_inside_a_name() -> None:
    text = (
        "The film was directed by Albert S. Rogell. It was the son of Muhammad bin Saud "
        "and Conchobar mac Nessa."
    )
    names = {e.name for e in extract(text)[0]}
    assert {"Albert S. Rogell", "Muhammad bin Saud", "Conchobar mac Nessa"} <= names
    assert "Albert" not in names and "Rogell" not in names  # no split at the initial


RUNBOOK = """# KubeHpaMaxedOut

Severity: warning
**Comments:** Threshold of 0.05/s avoids firing.

Check the HPA. The Horizontal Pod Autoscaler has been running at max replicas
for longer than 15 minutes, e.g. when `metrics-server` lags. Review the
Grafana dashboard. Note that scaling is limited by `maxReplicas`.

| NAMESPACE | NAME |
|---|---|
| default | web |

```shell
kubectl get hpa -n {{ $labels.namespace }}
```
"""


def test_layout_and_sentence_openers_are_not_entities() -> None:
    names = {e.name for e in extract(RUNBOOK, "HPA maxed out", "KubeHpaMaxedOut > Meaning")[0]}
    for noise in ("Severity", "Comments", "Threshold", "Check", "Review", "Note", "NAMESPACE"):
        assert noise not in names, noise
    assert not any(n.startswith(("e.g", "labels.")) for n in names)
    assert {"Horizontal Pod Autoscaler", "Grafana", "metrics-server", "maxReplicas"} <= names
    assert "KubeHpaMaxedOut" in names  # an identifier in the heading is a mention


def test_a_capitalised_word_the_text_also_writes_in_lower_case_is_ordinary() -> None:
    text = "Restart the pod when the restart count grows. Logs show a Restart loop on Kafka."
    names = {e.name for e in extract(text)[0]}
    assert "Restart" not in names and "Kafka" in names


def test_names_meet_across_accents_and_case_identifiers_stay_exact() -> None:
    assert entity_key("Akinoshū Kenji") == entity_key("akinoshu KENJI")
    assert entity_key("pool.max_size") == "pool.max_size"
    assert entity_key("ERR_CONN_RESET") != entity_key("ERR_CONN_RESETS")
    kinds = {e.name: e.type for e in extract("Compound words like split-brain and read-only.")[0]}
    assert "split-brain" not in kinds and "read-only" not in kinds  # no code mark, no digit


def test_section_numbers_are_no_hosts_and_env_vars_no_error_codes() -> None:
    from ingest.extract_offline import classify

    assert classify("4.2.1", "See section 4.2.1 for details.") is None
    assert classify("3.11.2", "Python 3.11.2 adds it.") is None
    assert classify("www.example.com", "Fetch www.example.com now.") == "hostname"
    assert classify("GIT_DIR", "Set $GIT_DIR to the repository.") == "env_var"
    assert classify("GIT_DIR", "Run GIT_DIR=/tmp/x git status.") == "env_var"
    assert classify("ERR_CONN_RESET", "We saw ERR_CONN_RESET at noon.") == "error_code"


def test_an_upper_case_constant_is_an_error_code_only_when_it_speaks_of_errors() -> None:
    from ingest.extract_offline import classify

    assert classify("SHA-1", "Objects are named by their SHA-1 hash.") == "identifier"
    assert classify("UTF-16", "The file is encoded in UTF-16 by default.") == "identifier"
    assert classify("HAVE_LIBREADLINE", "Define HAVE_LIBREADLINE when building.") == "identifier"
    assert classify("SO_REUSEADDR", "The call fails with SO_REUSEADDR unset.") == "error_code"
    assert classify("E_FAIL", "It returns E_FAIL.") == "error_code"
    assert classify("ORA-00060", "Seen ORA-00060 twice.") == "error_code"


def test_kebab_compounds_of_function_words_are_no_entities() -> None:
    text = "A built-in type, passed-in values, updated one-by-one, k-1 steps, up-to-date."
    names = {e.name for e in extract(text)[0]}
    assert not names & {"built-in", "passed-in", "one-by-one", "k-1", "up-to-date"}, names
    marked = {e.name for e in extract("The `built-in` module and side-band-64k.")[0]}
    assert {"built-in", "side-band-64k"} <= marked


def test_a_letter_minus_a_number_is_an_expression_wherever_it_stands() -> None:
    text = (
        "Sum the first N-1 terms of `x-2`, then use i-10 for Z-1 and k-100 steps.\n\n"
        "```\ny = a(n-1) + b(N-1) * x(i-10) + c(k-100);\n```\n"
    )
    names = {e.name for e in extract(text)[0]}
    assert not names & {"N-1", "x-2", "n-1", "i-10", "Z-1", "k-100"}, names
    text = "Hashes use SHA-1 and text UTF-8; see RFC-822, IEEE-754 and CRC-32."
    names = {e.name for e in extract(text)[0]}
    assert {"SHA-1", "UTF-8", "RFC-822", "IEEE-754", "CRC-32"} <= names, names
    assert "utf-8" in {e.name for e in extract("The file is read as utf-8 text.")[0]}


def test_a_description_after_a_colon_opens_like_a_sentence() -> None:
    text = "--stat : Show a diffstat of the change. --quiet : Suppress all output of Git."
    names = {e.name for e in extract(text)[0]}
    assert "Show" not in names and "Suppress" not in names, names
    assert "Python" in {e.name for e in extract("--quiet : Suppress output of Python now.")[0]}


def test_prefixed_compounds_and_longer_headings_name_no_kebab_entity() -> None:
    names = {e.name for e in extract("A non-linear fit and non-blocking calls.")[0]}
    assert not names & {"non-linear", "non-blocking"}, names
    headed = {e.name for e in extract("Some text.", heading="Using byte-compiled files")[0]}
    assert "byte-compiled" not in headed
    assert "ledger-db" in {e.name for e in extract("Some text.", heading="ledger-db")[0]}


def test_an_example_s_own_names_are_no_entities() -> None:
    text = (
        "Append to `sys.path_hooks` first; a bad hook raises ERR_ENCODE.\n\n"
        "```\nfoo_instance = make_thing()\nraw_data = sys.path_hooks.append(foo_instance)\n"
        "curl http://x/ -> HTTP 504, see /var/log/app.log, ERR_ENCODE\n```"
    )
    names = {e.name for e in extract(text)[0]}
    assert not names & {"foo_instance", "raw_data", "make_thing"}, names
    assert {"sys.path_hooks", "ERR_ENCODE", "HTTP 504", "/var/log/app.log"} <= names, names
    command = "Collect logs.\n\n```\noc -n openshift-storage rsh rook-ceph-tools\n```"
    assert {"openshift-storage", "rook-ceph-tools"} <= {e.name for e in extract(command)[0]}


def test_a_dotted_name_is_a_host_only_with_a_host_s_ending() -> None:
    from ingest.extract_offline import classify

    assert classify("sound.effects.echo", "Import sound.effects.echo first.") != "hostname"
    assert classify("trailer.see.command", "Set trailer.see.command to x.") != "hostname"
    assert classify("db.prod.example.de", "Connect to db.prod.example.de.") == "hostname"
    assert classify("api.svc.cluster.local", "Call api.svc.cluster.local.") == "hostname"


# One document in two chunks: the second mentions "Output" and "Windows" once, capitalised
# inside a sentence; the document as a whole writes "output" in lower case, "Windows" not.
DOCUMENT = [
    "The tool writes its output to a file. Each output line is checked, and the output "
    "is kept. It runs on Windows and on Linux, and on Windows it needs no installer.",
    "Errors go to the log, the rest to Output by default. The installer for Windows is "
    "signed. A cli-style menu and a gdb-like prompt are shown; `keep-going` is a flag.",
]


def test_a_lone_capitalised_word_the_document_writes_in_lower_case_is_no_name() -> None:
    words = document_words(DOCUMENT)
    assert "output" in words.ordinary and "windows" not in words.ordinary
    alone = {e.name for e in extract(DOCUMENT[1])[0]}
    assert "Output" in alone  # the chunk alone cannot tell it from a name
    with_words = {e.name for e in extract(DOCUMENT[1], words=words)[0]}
    assert "Output" not in with_words
    assert "Windows" in with_words  # a name its document capitalises stays one


def test_a_kebab_compound_of_the_documents_words_is_no_entity_unless_code() -> None:
    alone = {e.name for e in extract(DOCUMENT[1])[0]}
    assert {"cli-style", "gdb-like"} <= alone  # a short part reads as a name's
    words = document_words([*DOCUMENT, "In the cli, style counts: gdb looks like this."])
    with_words = {e.name for e in extract(DOCUMENT[1], words=words)[0]}
    assert "cli-style" not in with_words and "gdb-like" not in with_words
    assert "keep-going" in with_words  # marked as code: a name whatever its parts


def test_a_kebab_compound_of_common_english_words_is_no_entity_unless_code() -> None:
    text = (
        "A readable and eye-pleasing style for high-end machines, and old-style formatting. "
        "Set db-host and the api-server flag; a cli-style menu."
    )
    names = {e.name for e in extract(text)[0]}
    assert not names & {"eye-pleasing", "high-end", "old-style"}, names
    # a short part that is no common word reads as an abbreviation: a name
    assert {"db-host", "api-server", "cli-style"} <= names, names
    marked = {e.name for e in extract("The `high-end` option.")[0]}
    assert "high-end" in marked  # marked as code: a name whatever its parts
    # written again and again, an English compound is still no name of the corpus
    recurring = document_words(["Our old-style tables. Old-style tables sort; old-style wins."])
    assert "old-style" in recurring.recurring
    assert "old-style" not in {e.name for e in extract(text, words=recurring)[0]}


def test_only_the_chunk_s_prose_says_a_capitalised_word_is_ordinary() -> None:
    text = (
        "The Python Software Foundation signs it. Build with Profile Guided Optimization "
        "(`make profile-opt`).\n\n```\npython -m venv env\n```\n\nRun /usr/bin/python or "
        "python.exe to check."
    )
    names = {e.name for e in extract(text)[0]}
    # ``python`` and ``profile`` stand only in code, a path and a command's name here
    assert {"Python Software Foundation", "Profile Guided Optimization"} <= names, names
    assert not names & {"Software Foundation", "Guided Optimization"}, names
    prose = {e.name for e in extract(text + " Install the python package.")[0]}
    assert "Software Foundation" in prose  # the prose writes "python": an ordinary word
    # opening a sentence or a clause, a capital says nothing: an option's word will do
    options = "--enable-shared : Enable Shared Library builds.\n\n--with-lto : Use LTO."
    assert "Shared Library" in {e.name for e in extract(options)[0]}


def test_a_common_word_capitalised_once_in_its_document_is_no_name() -> None:
    text = "It builds on Windows and on Gentoo. Setup was Helped by the installer's Wizard."
    document = [text, "Windows is supported; on Windows the launcher is used."]
    words = document_words(document)
    assert "windows" in words.named and "helped" not in words.named
    names = {e.name for e in extract(text, words=words)[0]}
    # "Helped" and "Wizard" are English words written so once: labels, not names
    assert "Windows" in names and not names & {"Helped", "Wizard"}, names
    assert "Gentoo" in names  # no common English word: one mention will do
    assert {"Helped", "Wizard"} <= {e.name for e in extract(text)[0]}  # no document read


def test_document_words_ignore_code_and_sentence_openers() -> None:
    words = document_words(["Output is kept.\n\n```\noutput = run()\n```\n"])
    assert "output" not in words.lower  # only code writes it in lower case
    # a sentence's first word is capitalised by grammar: it weighs for neither side
    assert "output" in document_words(["Output is kept. Keep the output."]).ordinary
    assert "output" not in document_words(["Keep the output. It is Output, Output."]).ordinary


def test_names_follow_english_typography() -> None:
    text = (
        "The patch was reviewed by Greg Kroah-Hartman and Marc-André Lemburg. "
        "Git keeps a JSON-based index and runs on Unix-like systems. "
        "(Lacking support, the tool is slower on Windows.) "
        "See Tools/demo/redemo.py for a demo, and compare Mozilla/Netscape. "
        "Clients MUST NOT send it; since B. You may retry. Although Python is slow, it runs."
    )
    names = {e.name for e in extract(text)[0]}
    assert {"Greg Kroah-Hartman", "Marc-André Lemburg", "JSON", "Unix", "Mozilla"} <= names
    assert "Windows" in names
    # after the bracket, "Lacking" opens the sentence: capitalised by grammar
    for noise in ("Lacking", "Tools", "JSON-based", "Unix-like"):
        assert noise not in names, noise
    for noise in ("Clients MUST NOT", "Clients MUST", "B. You", "Although Python"):
        assert noise not in names, noise


def test_a_capitalised_name_with_a_file_s_extension_is_no_method() -> None:
    text = "Node.js loads Python.h rarely; Logger.error() and Math.log run. Buffer.from works."
    kinds = {e.name: e.type for e in extract(text)[0]}
    assert kinds["Node.js"] == "name" and kinds["Python.h"] == "name", kinds
    assert {kinds[n] for n in ("Logger.error", "Math.log", "Buffer.from")} == {"function"}


def test_a_quote_or_an_emphasis_mark_ends_no_name() -> None:
    text = (
        "Sending an 'Expect' header sends the request headers at once. Errors of the "
        "_Asynchronous Gateway_ arrive later; the Parents' Council meets in \u2018Reykjavik\u2019."
    )
    names = {e.name for e in extract(text)[0]}
    assert {"Expect", "Asynchronous Gateway", "Parents' Council", "Reykjavik"} <= names, names
    assert not any(n.endswith(("'", "_", "\u2019")) for n in names), names


def test_a_sentence_opener_the_document_mostly_writes_in_lower_case_is_dropped() -> None:
    chunk = "Surely Python raises an error here."
    assert "Surely Python" in {e.name for e in extract(chunk)[0]}
    words = document_words([chunk, "It surely fails; it will surely stop. Python stops."])
    names = {e.name for e in extract(chunk, words=words)[0]}
    assert "Surely Python" not in names
    # "git" is a command the page runs, yet "Git" is capitalised inside its sentences
    page = ["Run git log to see it, and git show for one commit; git is fast.", ""]
    page[1] = "How Git stores it, as Git does, is why Git and Git tools last. Git Wire Protocol."
    names = {e.name for e in extract(page[1], words=document_words(page))[0]}
    assert "Git Wire Protocol" in names


def test_a_definitions_later_paragraphs_are_prose_to_the_extractor() -> None:
    # read as code they made English compounds entities ("special-purpose"): a code
    # block's kebab-case words are names of things, a sentence's are not
    text = (
        "HEAD\n"
        ":   names the commit on which you based the changes.\n"
        "\n"
        "    There are a few special-purpose refs that do not begin with `refs/`.\n"
    )
    entities, _ = extract(text, "gitrevisions(7)")
    assert "special-purpose" not in {e.name for e in entities}


def test_a_manual_page_reference_names_a_command_even_of_function_words() -> None:
    text = "For the options, see git-for-each-ref(1); the changes land one-by-one."
    names = {e.name: e.type for e in extract(text, "git-branch(1)")[0]}
    assert names.get("git-for-each-ref") == "identifier"
    assert "one-by-one" not in names  # an English compound stays none


def test_an_identifier_with_an_underscore_ends_a_name_and_stands_alone() -> None:
    text = (
        "The call returns Uint32 SDL_GetWindowID for the window, and Grace Hopper "
        "wrote about _Compiler Design_ while the Lothair II Map_Viewer stayed."
    )
    names = {e.name for e in extract(text)[0]}
    assert "SDL_GetWindowID" in names, names  # the identifier, whole
    assert not any(" " in n and "_" in n.strip("_") for n in names), names
    assert {"Grace Hopper", "Compiler Design", "Lothair II"} <= names, names


def test_a_word_that_numbers_a_documents_parts_is_no_name() -> None:
    texts = [
        "Patterns are described in Section 6.5, and the archive layout in Section 4.2.",
        "The mirror list (see Section 8.1) names Falcot Corp again. We use Python 3.11 here.",
        "Python 3.11 runs the scripts; the Python team ships Python 3.11 as the default.",
    ]
    words = document_words(texts)
    assert "section" in words.numbered
    assert "python" not in words.numbered  # the same version again: a name with a version
    names = {e.name for text in texts for e in extract(text, words=words)[0]}
    assert "Section" not in names, names
    assert {"Falcot Corp", "Python"} <= names, names


def test_a_word_numbered_once_in_its_document_stays_a_name() -> None:
    texts = ["This page was created using Sphinx 5.3.0 from its sources, by Sphinx users."]
    words = document_words(texts)
    assert "sphinx" not in words.numbered
    assert "Sphinx" in {e.name for e in extract(texts[0], words=words)[0]}


def test_ordinary_words_set_in_capitals_are_a_label_not_a_name() -> None:
    text = (
        "BACK TO BASICS: read the GOING FURTHER notes, then send an HTTP GET to the "
        "NFS SERVER while Grace Hopper watches."
    )
    names = {e.name for e in extract(text)[0]}
    assert not {"BACK TO BASICS", "GOING FURTHER"} & names, names
    assert {"HTTP GET", "NFS SERVER", "Grace Hopper"} <= names, names


def test_a_name_with_empty_parentheses_after_a_space_is_a_function() -> None:
    # gtk-doc heads each function "g_file_delete_finish ()"; a setting with a
    # parenthesised note ("shared_pool_size (integer)") stays a setting
    entities, _ = extract(
        "The pool is set by `shared_pool_size` (integer).",
        "",
        "Functions > g_file_delete_finish\xa0()",
    )
    types = {e.name: e.type for e in entities}
    assert types["g_file_delete_finish"] == "function", types
    assert types["shared_pool_size"] == "config_key", types


def test_a_name_passed_as_an_argument_is_a_parameter_not_a_setting() -> None:
    # a C signature (gtk-doc), a call with a keyword argument; a setting stays a setting
    text = (
        "```\nvoid g_file_read_async (GFile *file,\n    int io_priority,\n"
        "    gpointer user_data);\n```\n\n"
        "Pass `user_data` and `io_priority` on; call `run(args, capture_output=True)`.\n\n"
        "Raise `shared_pool_size` first; `set_config('work_mem', 'x')` quotes its key; "
        "`gboolean (*can_mount) (GMount *mount)` declares a member."
    )
    words = document_words([text])
    assert {"io_priority", "user_data", "capture_output"} <= words.arguments
    assert "work_mem" not in words.arguments and "can_mount" not in words.arguments
    entities, _ = extract(text, "", "", words)
    types = {e.name: e.type for e in entities}
    assert types["user_data"] == "parameter", types
    assert types["io_priority"] == "parameter", types
    assert types["shared_pool_size"] == "config_key", types


def test_a_capital_and_a_full_stop_before_an_ordinary_word_end_a_sentence() -> None:
    text = (
        "The module is written in C. Specifically, it keeps its state in a struct and "
        "specifically avoids globals. The first essay was by Eric S. Raymond in 1997."
    )
    names = {e.name for e in extract(text, "", "", document_words([text]))[0]}
    assert "C. Specifically" not in names and "Specifically" not in names, names
    assert "Eric S. Raymond" in names, names
