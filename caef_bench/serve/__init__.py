"""`caef-bench serve`: CAEF behind an OpenAI-compatible API (`app`), every request's problems in one
step loop (`scheduler`). FastAPI and uvicorn are imported only when a server is made."""
