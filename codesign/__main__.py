from codesign.cli import main

raise SystemExit(main())
