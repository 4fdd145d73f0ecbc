from theorycheck.cli import main

raise SystemExit(main())
